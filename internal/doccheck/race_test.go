// SPDX-License-Identifier: Apache-2.0

package doccheck_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPlainOnlyCoversRaceSkips holds the Makefile's PLAIN_ONLY to the
// tests that change under the race detector: make test runs the race
// packages under -race only, so a test there that skips (or shrinks)
// when raceEnabled would never run in full unless PLAIN_ONLY names it.
func TestPlainOnlyCoversRaceSkips(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PLAIN_ONLY = \^\(([^)]*)\)\$\$$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no PLAIN_ONLY = ^(TestA|TestB)$$ line")
	}
	plain := map[string]bool{}
	for _, name := range strings.Split(string(m[1]), "|") {
		plain[name] = true
	}
	// changed: the tests that read raceEnabled, or a package-level
	// variable set from it in their file (a request count, say).
	changed := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "lab" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		raceVars := map[string]bool{"raceEnabled": true}
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.VAR && uses(g, map[string]bool{"raceEnabled": true}) {
				for _, s := range g.Specs {
					for _, id := range s.(*ast.ValueSpec).Names {
						raceVars[id.Name] = true
					}
				}
			}
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Body == nil {
				continue
			}
			if uses(fn.Body, map[string]bool{"raceEnabled": true}) {
				if !plain[fn.Name.Name] {
					t.Errorf("%s: %s changes under -race (raceEnabled) but the Makefile's PLAIN_ONLY does not name it, so make test never runs it in full", p, fn.Name.Name)
				}
			}
			if uses(fn.Body, raceVars) {
				changed[fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range plain {
		if !changed[name] {
			t.Errorf("Makefile: PLAIN_ONLY names %s, which does not change under -race (or no longer exists)", name)
		}
	}
}

// uses reports whether n mentions one of the identifiers names.
func uses(n ast.Node, names map[string]bool) bool {
	hit := false
	ast.Inspect(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && names[id.Name] {
			hit = true
		}
		return !hit
	})
	return hit
}
