// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"go/token"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// A leaf is one field of a configuration tree with its path, in YAML names
// ("backends.queue.max", "listeners[].read_header_timeout") and in Go names
// ("Backends.Queue.Max").
type leaf struct {
	yaml, gop string
	v         reflect.Value
}

// opaque types are leaves even when they are structs.
func opaque(t reflect.Type) bool {
	return t == durationType || t.PkgPath() == "gopkg.in/yaml.v3" || t.Kind() != reflect.Struct
}

// leaves lists the fields of v, recursively. A nil pointer is walked as
// the zero value of its type, and a slice as its first element (or a zero
// one), written "name[]".
func leaves(v reflect.Value) []leaf {
	var out []leaf
	var walk func(v reflect.Value, ypre, gpre string, depth int)
	walk = func(v reflect.Value, ypre, gpre string, depth int) {
		if depth > 12 {
			return
		}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			yname, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			if yname == "-" {
				continue
			}
			inline := strings.Contains(","+opts+",", ",inline,") || sf.Anonymous && sf.Tag.Get("yaml") == ""
			fv := v.Field(i)
			if inline {
				walk(deref(fv), ypre, gpre, depth+1)
				continue
			}
			if yname == "" {
				yname = strings.ToLower(sf.Name)
			}
			yp, gp := ypre+yname, gpre+sf.Name
			out = append(out, leaf{yp, gp, fv})
			e := deref(fv)
			if e.Kind() == reflect.Slice && e.Type().Elem().Kind() == reflect.Struct || e.Kind() == reflect.Slice && e.Type().Elem().Kind() == reflect.Pointer {
				var el reflect.Value
				if e.Len() > 0 {
					el = deref(e.Index(0))
				} else {
					el = reflect.New(derefType(e.Type().Elem())).Elem()
				}
				if !opaque(el.Type()) {
					walk(el, yp+"[].", gp+"[].", depth+1)
				}
				continue
			}
			if !opaque(e.Type()) {
				walk(e, yp+".", gp+".", depth+1)
			}
		}
	}
	v = deref(v)
	if v.Kind() == reflect.Struct {
		walk(v, "", "", 0)
	}
	return out
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// deref follows pointers; a nil pointer gives the zero value of its type.
func deref(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			if v.Kind() == reflect.Interface {
				return v
			}
			return reflect.New(v.Type().Elem()).Elem()
		}
		v = v.Elem()
	}
	return v
}

// normPath drops the "[]" of slices, so that "servers.url" and
// "servers[].url" are the same key.
func normPath(p string) string { return strings.ReplaceAll(p, "[]", "") }

// Find returns the fields of v that key names: the field at that path
// (YAML or Go names, "[]" optional), else every field whose path ends
// with "."+key. Values of different fields are all returned: a key that
// names several fields states the default of each.
func Find(v reflect.Value, key string) []reflect.Value { return findIn(leaves(v), key) }

func findIn(ls []leaf, key string) []reflect.Value {
	k := normPath(key)
	var out []reflect.Value
	for _, l := range ls {
		if normPath(l.yaml) == k || normPath(l.gop) == k {
			return []reflect.Value{l.v}
		}
	}
	for _, l := range ls {
		if strings.HasSuffix("."+normPath(l.yaml), "."+k) || strings.HasSuffix("."+normPath(l.gop), "."+k) {
			out = append(out, l.v)
		}
	}
	return out
}

// Names returns every spelling by which Find reaches a field of v: full
// paths and their suffixes, in YAML and Go names.
func Names(v reflect.Value) []string { return names(leaves(v)) }

func names(ls []leaf) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range ls {
		for _, p := range []string{normPath(l.yaml), normPath(l.gop)} {
			parts := strings.Split(p, ".")
			for i := range parts {
				s := strings.Join(parts[i:], ".")
				if !seen[s] {
					seen[s] = true
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// Tree returns a struct value whose fields are parts, named by their keys
// (YAML names), so that one Context can reach several configurations:
// Tree(map[string]any{"seda": control.DefaultSEDAConfig(), …}) answers
// "seda.alpha".
func Tree(parts map[string]any) reflect.Value {
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fields := make([]reflect.StructField, len(keys))
	for i, k := range keys {
		name := "F" + strconv.Itoa(i)
		if token.IsExported(k) && token.IsIdentifier(k) {
			name = k
		}
		fields[i] = reflect.StructField{Name: name, Type: reflect.TypeOf(parts[k]), Tag: reflect.StructTag(`yaml:"` + k + `"`)}
	}
	v := reflect.New(reflect.StructOf(fields)).Elem()
	for i, k := range keys {
		v.Field(i).Set(reflect.ValueOf(parts[k]))
	}
	return v
}
