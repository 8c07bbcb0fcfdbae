// SPDX-License-Identifier: Apache-2.0

// Command importgroups checks (or, with -fix, rewrites) the import blocks
// of Go files into the three groups this repository uses, in this order,
// separated by one blank line: the standard library; other modules;
// sluice's own packages (github.com/sluicehq/sluice and below, the lab
// included). gofmt sorts within a group but never moves an import between
// groups, so this is the check `make test` runs beside it.
//
//	go -C lab run ./cmd/importgroups ..        # list files out of order, exit 1 if any
//	go -C lab run ./cmd/importgroups -fix ..   # rewrite them
//
// Arguments are files or directories (walked; testdata, vendor and hidden
// directories are skipped). Exit status: 0 clean, 1 files out of order,
// 2 bad usage or a file that does not parse.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// localPrefix is the import path of this repository's modules.
const localPrefix = "github.com/sluicehq/sluice"

// group returns 0 for the standard library, 1 for other modules and 2
// for sluice's own packages.
func group(path string) int {
	switch {
	case path == localPrefix || strings.HasPrefix(path, localPrefix+"/"):
		return 2
	case strings.Contains(strings.SplitN(path, "/", 2)[0], "."):
		return 1
	}
	return 0
}

// spec is one import line of a block with the comments above it.
type spec struct {
	path string
	text string // the lines, as written, without the trailing newline
}

// regroup returns src with its parenthesized import block regrouped, and
// whether anything changed. Files with no block, or with a block that
// holds comments between groups it cannot attach to an import, are
// returned as they are.
func regroup(fset *token.FileSet, name string, src []byte) ([]byte, bool, error) {
	f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		return nil, false, err
	}
	var decl *ast.GenDecl
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT && g.Lparen.IsValid() {
			if decl != nil {
				return src, false, nil // two blocks: leave it to a human
			}
			decl = g
		}
	}
	if decl == nil {
		return src, false, nil
	}
	file := fset.File(decl.Pos())
	open := file.Offset(decl.Lparen) + 1
	closing := file.Offset(decl.Rparen)
	body := string(src[open:closing])
	// Split the body into specs: each import line with the comment lines
	// directly above it.
	var specs [3][]spec
	var pending []string
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == "":
			continue
		case strings.HasPrefix(t, "//"):
			pending = append(pending, line)
			continue
		}
		i := strings.IndexByte(t, '"')
		j := strings.LastIndexByte(t, '"')
		if i < 0 || j <= i {
			return src, false, nil // a form this tool does not know
		}
		p, err := strconv.Unquote(t[i : j+1])
		if err != nil {
			return src, false, nil
		}
		g := group(p)
		specs[g] = append(specs[g], spec{path: p, text: strings.Join(append(pending, line), "\n")})
		pending = nil
	}
	if len(pending) > 0 {
		return src, false, nil // a trailing comment: leave it to a human
	}
	var parts []string
	for _, g := range specs {
		if len(g) == 0 {
			continue
		}
		slices.SortStableFunc(g, func(a, b spec) int { return strings.Compare(a.path, b.path) })
		var lines []string
		for _, s := range g {
			lines = append(lines, s.text)
		}
		parts = append(parts, strings.Join(lines, "\n"))
	}
	want := "\n" + strings.Join(parts, "\n\n") + "\n"
	if want == body {
		return src, false, nil
	}
	out := slices.Concat(src[:open], []byte(want), src[closing:])
	if out, err = format.Source(out); err != nil {
		return nil, false, fmt.Errorf("%s: regrouped imports do not format: %v", name, err)
	}
	return out, !bytes.Equal(out, src), nil
}

// goFiles lists the .go files under the arguments.
func goFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				n := d.Name()
				if p != a && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(p, ".go") {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("importgroups", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fix := fl.Bool("fix", false, "rewrite files whose imports are out of order")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() == 0 {
		fmt.Fprintln(stderr, "importgroups: name files or directories")
		return 2
	}
	files, err := goFiles(fl.Args())
	if err != nil {
		fmt.Fprintf(stderr, "importgroups: %v\n", err)
		return 2
	}
	fset := token.NewFileSet()
	bad := 0
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintf(stderr, "importgroups: %v\n", err)
			return 2
		}
		out, changed, err := regroup(fset, name, src)
		if err != nil {
			fmt.Fprintf(stderr, "importgroups: %v\n", err)
			return 2
		}
		if !changed {
			continue
		}
		if *fix {
			if err := os.WriteFile(name, out, 0o644); err != nil {
				fmt.Fprintf(stderr, "importgroups: %v\n", err)
				return 2
			}
			fmt.Fprintf(stdout, "fixed %s\n", name)
			continue
		}
		fmt.Fprintf(stdout, "%s: imports not in three groups (standard library; other modules; %s)\n", name, localPrefix)
		bad++
	}
	if bad > 0 {
		fmt.Fprintf(stdout, "importgroups: %d file(s) out of order; fix with: go -C lab run ./cmd/importgroups -fix ..\n", bad)
		return 1
	}
	return 0
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
