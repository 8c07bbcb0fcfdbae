// SPDX-License-Identifier: Apache-2.0

package strictyaml

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/fielderr"
)

func TestSplitPath(t *testing.T) {
	got := splitPath("stages[1].params.target")
	want := []pathSeg{{key: "stages"}, {index: 1}, {key: "params"}, {key: "target"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("splitPath = %+v, want %+v", got, want)
	}
}

const fileDoc = `name: x
inner:
  limit: 3
list:
  - limit: 1
  - limit: 2
    timeout: 1s
by_name:
  a: {limit: 4}
base: &b {limit: 9}
alias: *b
`

func TestLineOf(t *testing.T) {
	root := ParseRoot([]byte(fileDoc))
	for path, want := range map[string]int{
		"":                1,
		"name":            1,
		"inner.limit":     3,
		"inner.timeout":   2, // not in the file: its parent's line
		"list[1].limit":   6,
		"list[1]":         6,
		"list[5].limit":   4, // beyond the sequence: the sequence's key
		"by_name.a.limit": 9,
		"alias.limit":     10, // through the alias, to the anchor's key
		"nope.deeper":     1,
	} {
		if got := LineOf(root, path); got != want {
			t.Errorf("LineOf(%q) = %d, want %d", path, got, want)
		}
	}
}

func TestDecodeFileErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"", "f.yaml: the file is empty: name is required"},
		{"- a\n", "f.yaml:1: the top level must be a mapping: name is required"},
		{"name: x\nnope: 1\n", `f.yaml:2: nope: unknown field "nope" (valid here: by_name, inner, list, name, raw, shared)`},
		{"name: x\ninner:\n  timeout: 5\n", `f.yaml:3: inner.timeout: 5 has no unit: write a duration such as "5s" or "250ms"`},
		{"name: x\ninner:\n  limit: many\n", `f.yaml:3: inner.limit: cannot unmarshal "many" (a string) into an integer`},
		{"name: [\n", "f.yaml:1: did not find expected node content"},
	} {
		var v outer
		_, err := DecodeFile("f.yaml", []byte(c.doc), &v, "name is required")
		var fe *FileError
		if !errors.As(err, &fe) || err.Error() != c.want {
			t.Errorf("%q: %v, want %s", c.doc, err, c.want)
		}
	}
	var v outer
	root, err := DecodeFile("f.yaml", []byte("name: x\nlist:\n  - limit: 1\n  - limit: 2\n"), &v, "")
	if err != nil || v.Name != "x" || len(v.List) != 2 {
		t.Fatalf("a good file: %+v, %v", v, err)
	}
	// A validation error after decoding gets its path's line.
	got := Locate("f.yaml", root, fielderr.Under("list[1]", &sluice.FieldError{Path: "limit", Msg: "2 is too many"}))
	if got.Error() != "f.yaml:4: list[1].limit: 2 is too many" {
		t.Errorf("Locate: %v", got)
	}
	if got := Locate("f.yaml", root, errors.New("plain")); got.Error() != "f.yaml: plain" {
		t.Errorf("Locate of a plain error: %v", got)
	}
	if Locate("f.yaml", root, nil) != nil {
		t.Error("Locate(nil) is not nil")
	}
	fe := &FileError{File: "g.yaml", Line: 2, Msg: "m"}
	if Locate("f.yaml", root, fmt.Errorf("wrapped: %w", fe)) != fe {
		t.Error("a *FileError is not returned as it is")
	}
}

func TestKeys(t *testing.T) {
	root := ParseRoot([]byte("base: &b {k: 1, ti: 2}\nparams:\n  <<: *b\n  own: 3\nalias: *b\nscalar: 4\n"))
	var params, alias, scalar *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "params":
			params = root.Content[i+1]
		case "alias":
			alias = root.Content[i+1]
		case "scalar":
			scalar = root.Content[i+1]
		}
	}
	names := func(ks []*yaml.Node) string {
		var out []string
		for _, k := range ks {
			out = append(out, fmt.Sprintf("%s@%d", k.Value, k.Line))
		}
		return strings.Join(out, " ")
	}
	if got := names(Keys(params)); got != "k@1 ti@1 own@4" {
		t.Errorf("Keys(params) = %s", got)
	}
	if got := names(Keys(alias)); got != "k@1 ti@1" {
		t.Errorf("Keys(alias) = %s", got)
	}
	if Keys(scalar) != nil || Keys(nil) != nil {
		t.Error("Keys of a scalar or nil is not nil")
	}
}

// ReadFile hands parse the file's name and contents, and names the file
// in the error of a file it cannot read.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path, func(name string, data []byte) (string, error) {
		return name + "|" + string(data), nil
	})
	if err != nil || got != path+"|a: 1\n" {
		t.Errorf("ReadFile = %q, %v; want the name and the contents", got, err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	_, err = ReadFile(missing, func(string, []byte) (int, error) {
		t.Error("parse called for a file that cannot be read")
		return 0, nil
	})
	var fe *FileError
	if !errors.As(err, &fe) || fe.File != missing || !strings.Contains(fe.Msg, "no such file") {
		t.Errorf("error %v (%T), want a *FileError naming %s", err, err, missing)
	}
}
