// SPDX-License-Identifier: Apache-2.0

package strictyaml

import (
	"errors"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
)

type inner struct {
	Limit   int           `yaml:"limit"`
	Timeout time.Duration `yaml:"timeout"`
}

type outer struct {
	Name   string           `yaml:"name"`
	Inner  inner            `yaml:"inner"`
	List   []inner          `yaml:"list"`
	ByName map[string]inner `yaml:"by_name"`
	Raw    yaml.Node        `yaml:"raw"`
	Base   `yaml:",inline"`
}

type Base struct {
	Shared float64 `yaml:"shared"`
}

func decode(t *testing.T, src string) (outer, error) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	v := outer{Inner: inner{Limit: 7}}
	return v, Decode(doc.Content[0], &v, "top")
}

func TestDecodeKeepsDefaultsAndReadsEverything(t *testing.T) {
	v, err := decode(t, `
name: a
shared: 0.5
inner: {timeout: 2s}
list: [{limit: 1}]
by_name: {x: {limit: 2}}
raw: {anything: [goes, here]}
`)
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != "a" || v.Shared != 0.5 || v.Inner.Limit != 7 || v.Inner.Timeout != 2*time.Second ||
		len(v.List) != 1 || v.List[0].Limit != 1 || v.ByName["x"].Limit != 2 || v.Raw.Kind != yaml.MappingNode {
		t.Fatalf("decoded %+v", v)
	}
}

func TestErrorsNamePathLineAndValue(t *testing.T) {
	for _, c := range []struct {
		name, src, path string
		line            int
		msg             string
	}{
		{"unknown top key", "name: a\nnmae: b\n", "top.nmae", 2, `unknown field "nmae" (valid here: by_name, inner, list, name, raw, shared)`},
		{"unknown nested key", "inner:\n  limt: 3\n", "top.inner.limt", 2, `unknown field "limt" (valid here: limit, timeout)`},
		{"in a list", "list:\n  - limit: 1\n  - lim: 2\n", "top.list[1].lim", 3, `unknown field "lim"`},
		{"in a map", "by_name:\n  x:\n    nope: 1\n", "top.by_name.x.nope", 3, `unknown field "nope"`},
		{"in a merge", "base: &b {limt: 1}\n", "top.base", 1, `unknown field "base"`},
		{"merged unknown", "inner:\n  <<: {limt: 1}\n", "top.inner.limt", 2, `unknown field "limt"`},
		{"duration without unit", "inner:\n  timeout: 5\n", "top.inner.timeout", 2, `5 has no unit`},
		{"wrong type", "inner:\n  limit: lots\n", "top.inner.limit", 2, `cannot unmarshal "lots" (a string) into an integer`},
		{"bad duration", "inner:\n  timeout: fast\n", "top.inner.timeout", 2, `cannot unmarshal "fast" (a string) into a duration such as "250ms"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decode(t, c.src)
			var fe *sluice.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *sluice.FieldError", err)
			}
			if fe.Path != c.path || fe.Line != c.line || !strings.Contains(fe.Msg, c.msg) {
				t.Fatalf("got path %q line %d msg %q; want %q line %d containing %q", fe.Path, fe.Line, fe.Msg, c.path, c.line, c.msg)
			}
		})
	}
}

// yaml.v3 refuses every integer for a time.Duration, 0 included: the
// check says so in words a YAML writer understands.
func TestZeroDurationNeedsAUnitToo(t *testing.T) {
	_, err := decode(t, "inner: {timeout: 0}\n")
	if err == nil || !strings.Contains(err.Error(), `0 has no unit: write a duration such as "0s"`) {
		t.Fatalf("got %v", err)
	}
}
