// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"fmt"
	"go/ast"
	"path/filepath"
	"regexp"
	"strings"
)

// API is the exported names of a set of Go packages, by package name:
// what a document may name in code spans as pkg.Name, pkg.Type.Member or
// Type.Member.
type API map[string]*PackageAPI

// PackageAPI is one package's exported top-level names and the exported
// methods and fields of its types.
type PackageAPI struct {
	// Names are the exported functions, types, variables and constants.
	Names map[string]bool
	// Members are, by type name, its exported methods and fields (those
	// of embedded types too, when the embedded type is the package's).
	Members map[string]map[string]bool
	// embeds are, by type name, the embedded types' names.
	embeds map[string][]string
}

// LoadAPI parses the non-test files of each of dirs (relative to root)
// and returns their exported names; a package is known by its name
// ("sluice" for the root package).
func LoadAPI(root string, dirs []string) (API, error) {
	out := API{}
	for _, d := range dirs {
		p, err := LoadPackage(filepath.Join(root, d), d)
		if err != nil {
			return nil, err
		}
		if len(p.Files) == 0 {
			continue
		}
		out[p.Files[0].Name.Name] = packageAPI(p)
	}
	return out, nil
}

func packageAPI(p *Package) *PackageAPI {
	a := &PackageAPI{Names: map[string]bool{}, Members: map[string]map[string]bool{}, embeds: map[string][]string{}}
	member := func(typ, name string) {
		if a.Members[typ] == nil {
			a.Members[typ] = map[string]bool{}
		}
		a.Members[typ][name] = true
	}
	for _, f := range p.Files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					a.Names[d.Name.Name] = true
				} else if len(d.Recv.List) == 1 {
					member(recvType(d.Recv.List[0].Type), d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						a.Names[s.Name.Name] = true
						a.typeMembers(s, member)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							a.Names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return a
}

// typeMembers records the fields (and interface methods) of a type.
func (a *PackageAPI) typeMembers(s *ast.TypeSpec, member func(typ, name string)) {
	switch t := s.Type.(type) {
	case *ast.StructType:
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 {
				n := recvType(f.Type)
				member(s.Name.Name, n)
				a.embeds[s.Name.Name] = append(a.embeds[s.Name.Name], n)
			}
			for _, n := range f.Names {
				member(s.Name.Name, n.Name)
			}
		}
	case *ast.InterfaceType:
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				member(s.Name.Name, n.Name)
			}
			if len(m.Names) == 0 {
				a.embeds[s.Name.Name] = append(a.embeds[s.Name.Name], recvType(m.Type))
			}
		}
	}
}

// recvType returns the name of a receiver's or embedded field's type.
func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvType(t.X)
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.Ident:
		return t.Name
	}
	return ""
}

// has reports whether type typ of a has member m, through its embedded
// types; an embedded type of another package counts as having any.
func (a *PackageAPI) has(typ, m string, depth int) bool {
	if a.Members[typ][m] {
		return true
	}
	for _, e := range a.embeds[typ] {
		if !a.Names[e] || depth < 4 && a.has(e, m, depth+1) {
			return true
		}
	}
	return false
}

// reGoRef is a code span that names Go: pkg.Name, pkg.Name.Member,
// Type.Member, optionally called ("(…)").
var reGoRef = regexp.MustCompile("`((?:[a-z][a-z0-9]*\\.)?[A-Z][A-Za-z0-9_]*(?:\\.[A-Z][A-Za-z0-9_]*)?)(?:\\([^`]*\\))?`")

// CheckRefs returns a Finding for every code span of a document (named
// file, source src) that names Go that a does not have: pkg.Name where
// pkg is a package of a and Name is not its exported name, pkg.Type.Member
// or Type.Member where Type is a type of a and Member is neither a method
// nor a field of it. Spans of other shapes, and Type.Member where Type is
// no type of a's packages, are left alone.
func (a API) CheckRefs(file, src string) []Finding {
	var out []Finding
	for i, line := range strings.Split(src, "\n") {
		for _, m := range reGoRef.FindAllStringSubmatch(line, -1) {
			if msg := a.check(m[1]); msg != "" {
				out = append(out, Finding{Pos: fmt.Sprintf("%s:%d", file, i+1), Msg: fmt.Sprintf("`%s`: %s", m[0][1:len(m[0])-1], msg)})
			}
		}
	}
	return out
}

func (a API) check(ref string) string {
	parts := strings.Split(ref, ".")
	if p, ok := a[parts[0]]; ok {
		switch {
		case !p.Names[parts[1]]:
			return fmt.Sprintf("package %s has no exported %s", parts[0], parts[1])
		case len(parts) == 3 && !p.has(parts[1], parts[2], 0):
			return fmt.Sprintf("%s.%s has no method or field %s", parts[0], parts[1], parts[2])
		}
		return ""
	}
	if len(parts) != 2 || !strings.HasPrefix(parts[0], strings.ToUpper(parts[0][:1])) {
		return ""
	}
	var owners []string
	for name, p := range a {
		if p.Names[parts[0]] && len(p.Members[parts[0]]) > 0 {
			if p.has(parts[0], parts[1], 0) {
				return ""
			}
			owners = append(owners, name+"."+parts[0])
		}
	}
	if len(owners) == 0 {
		return ""
	}
	return fmt.Sprintf("%s has no method or field %s", strings.Join(owners, " and "), parts[1])
}
