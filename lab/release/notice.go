// SPDX-License-Identifier: Apache-2.0

package release

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// noticeFiles are the names a module's NOTICE file goes by.
var noticeFiles = []string{"NOTICE", "NOTICE.txt", "NOTICE.md"}

// reNoticeHeader starts a module's part of sluice's NOTICE: "-- PATH --".
var reNoticeHeader = regexp.MustCompile(`(?m)^-- (\S+) --$`)

// CheckNotice checks sluice's NOTICE (notice) against a binary: every
// module compiled into it (bi.Deps, a replacement in its stead) whose
// directory in modcache (the module cache, `go env GOMODCACHE`) holds a
// NOTICE file has a part "-- PATH --" holding that file's text (spaces
// aside), and every part names such a module. A dependency that brings a
// NOTICE, or drops one, fails the check until NOTICE follows.
func CheckNotice(notice []byte, bi *buildinfo.BuildInfo, modcache string) error {
	parts := map[string]string{}
	text := string(notice)
	locs := reNoticeHeader.FindAllStringSubmatchIndex(text, -1)
	for i, l := range locs {
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		parts[text[l[2]:l[3]]] = text[l[1]:end]
	}
	var errs []error
	want := map[string]bool{}
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		dir := filepath.Join(modcache, escapeModulePath(m.Path)+"@"+m.Version)
		if _, err := os.Stat(dir); err != nil {
			errs = append(errs, fmt.Errorf("module %s@%s is not in the module cache (%s): %w", m.Path, m.Version, modcache, err))
			continue
		}
		for _, name := range noticeFiles {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				continue
			}
			want[d.Path] = true
			part, ok := parts[d.Path]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("NOTICE has no part \"-- %s --\" for %s@%s's %s", d.Path, m.Path, m.Version, name))
			case squash(part) != squash(string(b)):
				errs = append(errs, fmt.Errorf("NOTICE's part for %s is not %s@%s's %s", d.Path, m.Path, m.Version, name))
			}
		}
	}
	for _, p := range sortedKeys(parts) {
		if !want[p] {
			errs = append(errs, fmt.Errorf("NOTICE has a part for %s, which the binary holds no NOTICE of", p))
		}
	}
	return errors.Join(errs...)
}

// squash drops every space, so that line breaks and trailing blanks do
// not matter.
func squash(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// escapeModulePath is a module path as the module cache writes it: each
// upper-case letter as "!" and its lower case (golang.org/x/mod/module's
// EscapePath).
func escapeModulePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
