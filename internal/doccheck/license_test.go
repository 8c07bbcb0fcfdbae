// SPDX-License-Identifier: Apache-2.0

package doccheck_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spdx is the licence line every Go file and shell script of the tree
// starts with (after a script's #! line): the SPDX identifier of the
// LICENSE file's Apache License 2.0.
const spdx = "SPDX-License-Identifier: Apache-2.0"

// TestLicenseHeaders holds every Go file and shell script of both
// modules to the SPDX line among its first three lines, so that a file
// copied out of the tree still says under which licence it may be used.
func TestLicenseHeaders(t *testing.T) {
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "out", "bin", "dist", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, ".sh") && filepath.ToSlash(p) != filepath.ToSlash(filepath.Join(root, ".ci/run")) {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for i := 0; i < 3 && sc.Scan(); i++ {
			if strings.Contains(sc.Text(), spdx) {
				n++
				return nil
			}
		}
		t.Errorf("%s: no %q line at the top", p, spdx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("only %d files carry the licence line: the walk missed the tree", n)
	}
}
