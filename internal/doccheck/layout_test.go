// SPDX-License-Identifier: Apache-2.0

package doccheck_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/architecture.md's layout lists every directory of Go code in both
// modules, and nothing that is not there.
func TestArchitectureLayout(t *testing.T) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "out" || name == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			if !slices.Contains(dirs, rel) {
				dirs = append(dirs, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "## Layout")
	end := strings.Index(text[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("docs/architecture.md has no ## Layout section")
	}
	section := text[start : start+1+end]
	// The entries: the first word of each line of the code blocks.
	listed := map[string]bool{}
	entry := regexp.MustCompile(`(?m)^([.a-z0-9/_-]+)/?\s`)
	inBlock := false
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if m := entry.FindStringSubmatch(line); inBlock && m != nil {
			listed[strings.TrimSuffix(m[1], "/")] = true
		}
	}
	for _, d := range dirs {
		if !listed[d] {
			t.Errorf("docs/architecture.md's layout does not list %s", d)
		}
	}
	for d := range listed {
		if !slices.Contains(dirs, d) {
			t.Errorf("docs/architecture.md's layout lists %s, which holds no Go code", d)
		}
	}
}
