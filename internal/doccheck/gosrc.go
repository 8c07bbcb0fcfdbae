// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Text is prose joined from several source lines, with the line each byte
// came from.
type Text struct {
	File  string
	S     string
	lines []int // lines[i]: source line of the i-th joined line
	offs  []int // offs[i]: offset in S where it starts
}

// Line returns the source line of the byte at off.
func (t *Text) Line(off int) int {
	i := sort.Search(len(t.offs), func(i int) bool { return t.offs[i] > off }) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(t.lines) {
		return 0
	}
	return t.lines[i]
}

// Pos returns "file:line" of the byte at off.
func (t *Text) Pos(off int) string { return t.File + ":" + strconv.Itoa(t.Line(off)) }

// add appends one line of prose.
func (t *Text) add(line int, s string) {
	if len(t.offs) > 0 {
		t.S += " "
	}
	t.offs = append(t.offs, len(t.S))
	t.lines = append(t.lines, line)
	t.S += s
}

// commentText joins the comment groups into one Text, without the comment
// markers.
func commentText(fset *token.FileSet, rel string, groups ...*ast.CommentGroup) *Text {
	t := &Text{File: rel}
	for _, g := range groups {
		if g == nil {
			continue
		}
		for _, c := range g.List {
			line := fset.Position(c.Slash).Line
			s := c.Text
			switch {
			case strings.HasPrefix(s, "//"):
				t.add(line, strings.TrimSpace(s[2:]))
			case strings.HasPrefix(s, "/*"):
				for i, l := range strings.Split(strings.TrimSuffix(s[2:], "*/"), "\n") {
					t.add(line+i, strings.TrimSpace(l))
				}
			}
		}
	}
	return t
}

// Package is the parsed source of one Go package (its non-test files).
type Package struct {
	Dir  string // as given
	Rel  string // the directory relative to the module root, for positions
	Fset *token.FileSet
	// Files by name, sorted.
	Files []*ast.File
	names []string
}

// LoadPackage parses the non-test Go files of dir with their comments. rel
// names the directory in positions ("control").
func LoadPackage(dir, rel string) (*Package, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &Package{Dir: dir, Rel: rel, Fset: token.NewFileSet()}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.Fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		p.Files = append(p.Files, f)
		p.names = append(p.names, n)
	}
	return p, nil
}

func (p *Package) rel(f int) string { return filepath.ToSlash(filepath.Join(p.Rel, p.names[f])) }

// Field is one name of a struct field.
type Field struct {
	Name     string // Go name (an embedded field's type name)
	YAML     string // yaml tag name, "" when none
	Inline   bool   // yaml:",inline" or embedded without a tag
	Embedded bool
}

// Group is a run of struct fields documented by one comment: a field with
// a doc comment and the undocumented fields declared right after it
// ("MinRate, MaxRate bound the rate (defaults 10 and 100000)" above
// MinRate and MaxRate).
type Group struct {
	Fields []Field
	Doc    *Text
}

// Struct is a struct type declaration.
type Struct struct {
	Name   string
	Pos    string
	Groups []Group
}

// Structs returns the package's struct types by name.
func (p *Package) Structs() map[string]*Struct {
	out := map[string]*Struct{}
	for fi, f := range p.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			s := &Struct{Name: ts.Name.Name, Pos: p.rel(fi) + ":" + strconv.Itoa(p.Fset.Position(ts.Pos()).Line)}
			prevEnd := -1
			for _, fl := range st.Fields.List {
				var fields []Field
				tag := ""
				if fl.Tag != nil {
					tag, _ = strconv.Unquote(fl.Tag.Value)
				}
				y := reflect.StructTag(tag).Get("yaml")
				yname, yopts, _ := strings.Cut(y, ",")
				inline := strings.Contains(","+yopts+",", ",inline,")
				if len(fl.Names) == 0 {
					fields = append(fields, Field{Name: embeddedName(fl.Type), YAML: yname, Embedded: true, Inline: inline || y == ""})
				}
				for _, nm := range fl.Names {
					fields = append(fields, Field{Name: nm.Name, YAML: yname, Inline: inline})
				}
				line := p.Fset.Position(fl.Pos()).Line
				documented := fl.Doc != nil || fl.Comment != nil
				if !documented && len(s.Groups) > 0 && line == prevEnd+1 {
					g := &s.Groups[len(s.Groups)-1]
					g.Fields = append(g.Fields, fields...)
				} else {
					doc := commentText(p.Fset, p.rel(fi), fl.Doc, fl.Comment)
					s.Groups = append(s.Groups, Group{Fields: fields, Doc: doc})
				}
				prevEnd = p.Fset.Position(fl.End()).Line
			}
			out[s.Name] = s
			return false
		})
	}
	return out
}

func embeddedName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return embeddedName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.IndexExpr:
		return embeddedName(t.X)
	}
	return ""
}

// Comment is a comment group of the package other than a struct field's.
type Comment struct {
	// Of names what the comment documents: "package", a function
	// "DefaultConfig", a method "Config.SetDefaults", a type, const or
	// var name, or "" for a comment inside a body or alone.
	Of  string
	Doc *Text
}

// Comments returns every comment group of the package that does not
// document a struct field.
func (p *Package) Comments() []Comment {
	var out []Comment
	for fi, f := range p.Files {
		owner := map[*ast.CommentGroup]string{}
		if f.Doc != nil {
			owner[f.Doc] = "package"
		}
		fieldDocs := map[*ast.CommentGroup]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch d := n.(type) {
			case *ast.FuncDecl:
				name := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					name = embeddedName(d.Recv.List[0].Type) + "." + name
				}
				if d.Doc != nil {
					owner[d.Doc] = name
				}
			case *ast.GenDecl:
				if d.Doc != nil && len(d.Specs) > 0 {
					owner[d.Doc] = specName(d.Specs[0])
				}
			case *ast.TypeSpec:
				if d.Doc != nil {
					owner[d.Doc] = d.Name.Name
				}
			case *ast.ValueSpec:
				if d.Doc != nil {
					owner[d.Doc] = d.Names[0].Name
				}
				if d.Comment != nil {
					owner[d.Comment] = d.Names[0].Name
				}
			case *ast.Field:
				if d.Doc != nil {
					fieldDocs[d.Doc] = true
				}
				if d.Comment != nil {
					fieldDocs[d.Comment] = true
				}
			}
			return true
		})
		for _, g := range f.Comments {
			if fieldDocs[g] {
				continue
			}
			out = append(out, Comment{Of: owner[g], Doc: commentText(p.Fset, p.rel(fi), g)})
		}
	}
	return out
}

func specName(s ast.Spec) string {
	switch s := s.(type) {
	case *ast.TypeSpec:
		return s.Name.Name
	case *ast.ValueSpec:
		return s.Names[0].Name
	}
	return ""
}
