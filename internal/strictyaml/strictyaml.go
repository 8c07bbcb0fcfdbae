// SPDX-License-Identifier: Apache-2.0

// Package strictyaml is sluice's one strict YAML decoder: every
// configuration section (the proxy's file, a stage's controller params)
// goes through it, so that an unknown key, an integer given for a
// duration, or a value of the wrong type is reported the same way
// everywhere: as a *sluice.FieldError naming the key's YAML path and line.
package strictyaml

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice"
)

var (
	nodeType     = reflect.TypeOf(yaml.Node{})
	durationType = reflect.TypeOf(time.Duration(0))
	timeType     = reflect.TypeOf(time.Time{})
)

// Check walks n along the Go type t (pointers followed) and reports the
// first mapping key that t does not have (naming the valid ones), and the
// first integer given for a time.Duration (yaml would read "timeout: 5" as
// 5 ns). Merge keys (<<: *base) are checked like the mapping's own keys.
// It records in lines (when not nil) the deepest path of each line, for
// placing later decoding errors. yaml.Node fields (a stage's params, which
// the policy decodes for its controller) are left alone.
func Check(n *yaml.Node, t reflect.Type, path string, lines map[int]string) error {
	n = resolve(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if path != "" && lines != nil {
		lines[n.Line] = path
	}
	switch {
	case t == nodeType || t == timeType:
		return nil
	case t == durationType:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
			return &sluice.FieldError{Path: path, Line: n.Line,
				Msg: fmt.Sprintf("%s has no unit: write a duration such as \"%ss\" or \"250ms\"", n.Value, n.Value)}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil // the decoder reports the type mismatch
		}
		fields := Fields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" || k.Value == "<<" {
				for _, m := range mergeSources(v) {
					if err := Check(m, t, path, lines); err != nil {
						return err
					}
				}
				continue
			}
			p := join(path, k.Value)
			f, ok := fields[k.Value]
			if !ok {
				names := make([]string, 0, len(fields))
				for name := range fields {
					names = append(names, name)
				}
				sort.Strings(names)
				return &sluice.FieldError{Path: p, Line: k.Line, Msg: fmt.Sprintf("unknown field %q (valid here: %s)", k.Value, strings.Join(names, ", "))}
			}
			if lines != nil {
				lines[k.Line] = p
			}
			if err := Check(v, f, p, lines); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, e := range n.Content {
			if err := Check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), lines); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if lines != nil {
				lines[k.Line] = p
			}
			if err := Check(v, t.Elem(), p, lines); err != nil {
				return err
			}
		}
	}
	return nil
}

// Decode checks n against v's type (see Check) and decodes it into v (a
// pointer, which keeps the defaults it holds for keys n does not set). A
// decoding error names the path and line of the offending value.
func Decode(n *yaml.Node, v any, path string) error {
	lines := map[int]string{}
	if err := Check(n, reflect.TypeOf(v), path, lines); err != nil {
		return err
	}
	if err := n.Decode(v); err != nil {
		return DecodeError(err, path, lines)
	}
	return nil
}

var (
	yamlLine   = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlTypeEr = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(.*)` into (.+)$")
)

// kinds names yaml's scalar tags and the Go types of sluice's configuration
// for a reader who wrote YAML, not Go.
var (
	tagKinds = map[string]string{
		"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
		"map": "a mapping", "seq": "a sequence", "null": "null",
	}
	goKinds = map[string]string{
		"time.Duration": `a duration such as "250ms"`, "float64": "a number",
		"int": "an integer", "int64": "an integer", "uint64": "a non-negative integer",
		"bool": "true or false", "string": "a string",
	}
)

// typeMsg rewrites yaml's "cannot unmarshal !!str `fast` into
// time.Duration" as "cannot unmarshal "fast" (a string) into a duration
// such as "250ms"".
func typeMsg(msg string) string {
	m := yamlTypeEr.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	from, into := tagKinds[m[1]], goKinds[m[3]]
	if from == "" {
		from = "!!" + m[1]
	}
	if into == "" {
		into = m[3]
	}
	return fmt.Sprintf("cannot unmarshal %q (%s) into %s", m[2], from, into)
}

// DecodeError turns a yaml.v3 decoding error into a *sluice.FieldError at
// the path recorded for its line (or at path), with that line.
func DecodeError(err error, path string, lines map[int]string) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimSpace(strings.TrimPrefix(msg, "yaml: unmarshal errors:\n"))
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		p := lines[line]
		p = cmp.Or(p, path)
		return &sluice.FieldError{Path: p, Line: line, Msg: typeMsg(m[2])}
	}
	return &sluice.FieldError{Path: path, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// Fields maps the YAML key of each field of struct type t (inline structs
// flattened) to the field's type.
func Fields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			for k, v := range Fields(ft) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// mergeSources returns the mappings a merge key's value names.
func mergeSources(v *yaml.Node) []*yaml.Node {
	v = resolve(v)
	if v.Kind == yaml.SequenceNode {
		return v.Content
	}
	return []*yaml.Node{v}
}

// Keys returns the key nodes of the mapping n (a document's mapping, an
// alias of one, and the keys its merge keys bring in (<<: *base), in
// order, a merged key after the merge key's position); nil when n is not
// a mapping.
func Keys(n *yaml.Node) []*yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return nil
	}
	var out []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" || k.Value == "<<" {
			for _, m := range mergeSources(v) {
				out = append(out, Keys(m)...)
			}
			continue
		}
		out = append(out, k)
	}
	return out
}

// Resolve follows aliases (params: *common) to the node they name.
func Resolve(n *yaml.Node) *yaml.Node { return resolve(n) }

// resolve follows aliases (params: *common) to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
