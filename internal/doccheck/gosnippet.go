// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Snippet is a fenced Go code block of a document and the Example it is
// taken from, named by the HTML comment on the line above the fence:
//
//	<!-- example: policy ExampleWrap -->
//
// (the package's directory from the module root, "." for the root
// package, and the Example function's name).
type Snippet struct {
	// Line is the line of the opening fence, counted from 1.
	Line int
	// Text is the block's content.
	Text string
	// Dir and Example name the Example; both "" when the block has no
	// marker.
	Dir, Example string
}

var reExampleMarker = regexp.MustCompile(`^<!--\s*example:\s*(\S+)\s+(Example\w*)\s*-->$`)

// GoSnippets returns the Go code blocks of a Markdown document, with the
// Example each names.
func GoSnippets(src string) []Snippet {
	lines := strings.Split(src, "\n")
	var out []Snippet
	for _, b := range CodeBlocks(src) {
		if b.Lang != "go" {
			continue
		}
		s := Snippet{Line: b.Line, Text: b.Text}
		for i := b.Line - 2; i >= 0; i-- {
			l := strings.TrimSpace(lines[i])
			if l == "" {
				continue
			}
			if m := reExampleMarker.FindStringSubmatch(l); m != nil {
				s.Dir, s.Example = m[1], m[2]
			}
			break
		}
		out = append(out, s)
	}
	return out
}

// CheckSnippet checks that s is taken from its Example, in the package
// directory s.Dir under root: its lines, after an optional import block
// whose every path the Example's file imports, are a run of consecutive
// lines of the Example's body (before its Output comment). Leading tabs
// count as four spaces and trailing blanks are ignored.
func CheckSnippet(root string, s Snippet) error {
	if s.Example == "" {
		return fmt.Errorf("a Go block without <!-- example: DIR ExampleName --> above it: every Go snippet is an Example that go test runs")
	}
	body, imports, err := exampleBody(filepath.Join(root, s.Dir), s.Example)
	if err != nil {
		return err
	}
	snip, snipImports := splitImports(normLines(s.Text))
	for _, p := range snipImports {
		if !slices.Contains(imports, p) {
			return fmt.Errorf("imports %q, which the file of %s does not", p, s.Example)
		}
	}
	if len(snip) == 0 {
		return fmt.Errorf("no code after the imports")
	}
	for i := 0; i+len(snip) <= len(body); i++ {
		if slices.Equal(body[i:i+len(snip)], snip) {
			return nil
		}
	}
	for i, l := range snip {
		if !slices.Contains(body, l) {
			return fmt.Errorf("line %d, %q, is not a line of %s in %s", i+1, strings.TrimSpace(l), s.Example, s.Dir)
		}
	}
	return fmt.Errorf("its lines are those of %s in %s, but not in the same order or not consecutive", s.Example, s.Dir)
}

// exampleBody returns the lines of the named Example function of the
// package in dir (its _test.go files), normalised and dedented, up to its
// Output comment, and the import paths of its file.
func exampleBody(dir, name string) (body, imports []string, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			return nil, nil, err
		}
		f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != name || fn.Body == nil {
				continue
			}
			text := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
			for _, l := range normLines(text) {
				if t := strings.TrimSpace(l); strings.HasPrefix(t, "// Output:") || strings.HasPrefix(t, "// Unordered output:") {
					break
				}
				body = append(body, strings.TrimPrefix(l, "    "))
			}
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				imports = append(imports, p)
			}
			return body, imports, nil
		}
	}
	return nil, nil, fmt.Errorf("no function %s in the tests of %s", name, dir)
}

// normLines splits text into lines with leading tabs as four spaces and
// trailing blanks removed, without the blank lines at either end.
func normLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		i := 0
		for i < len(l) && l[i] == '\t' {
			i++
		}
		out = append(out, strings.TrimRight(strings.Repeat("    ", i)+l[i:], " \t\r"))
	}
	for len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

var reImportPath = regexp.MustCompile(`^(?:import\s+)?(?:\w+\s+)?"([^"]+)"$`)

// splitImports takes a leading import declaration (one line or a
// parenthesised block) off lines and returns the rest and its paths.
func splitImports(lines []string) (rest, paths []string) {
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "import") {
		return lines, nil
	}
	if m := reImportPath.FindStringSubmatch(strings.TrimSpace(lines[0])); m != nil {
		return normLines(strings.Join(lines[1:], "\n")), []string{m[1]}
	}
	for i := 1; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == ")" {
			return normLines(strings.Join(lines[i+1:], "\n")), paths
		}
		if m := reImportPath.FindStringSubmatch(l); m != nil {
			paths = append(paths, m[1])
		}
	}
	return nil, paths
}
