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
	found := map[string]bool{}
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
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Body == nil {
				continue
			}
			if usesRaceEnabled(fn.Body) {
				found[fn.Name.Name] = true
				if !plain[fn.Name.Name] {
					t.Errorf("%s: %s changes under -race (raceEnabled) but the Makefile's PLAIN_ONLY does not name it, so make test never runs it in full", p, fn.Name.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A test may also change through a package-level variable set from
	// raceEnabled (a request count, say).
	for name := range plain {
		if !found[name] && !testReadsRaceVar(t, name) {
			t.Errorf("Makefile: PLAIN_ONLY names %s, which does not change under -race (or no longer exists)", name)
		}
	}
}

// usesRaceEnabled reports whether n mentions raceEnabled.
func usesRaceEnabled(n ast.Node) bool {
	hit := false
	ast.Inspect(n, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == "raceEnabled" {
			hit = true
		}
		return !hit
	})
	return hit
}

// testReadsRaceVar reports whether the test named name reads a
// package-level variable whose value depends on raceEnabled.
func testReadsRaceVar(t *testing.T, name string) bool {
	t.Helper()
	hit := false
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || hit {
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
		raceVars := map[string]bool{}
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.VAR && usesRaceEnabled(g) {
				for _, s := range g.Specs {
					for _, id := range s.(*ast.ValueSpec).Names {
						raceVars[id.Name] = true
					}
				}
			}
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Name.Name != name || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && raceVars[id.Name] {
					hit = true
				}
				return !hit
			})
		}
		return nil
	})
	return hit
}
