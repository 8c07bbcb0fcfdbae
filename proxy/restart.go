// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/secret"
)

// firstDiff returns the YAML path, under path, of the first value where a
// and b (of one type) differ, or "" when they are equal. Struct fields
// are compared by their YAML keys (inline structs flattened), lists
// element by element (a longer list differs at its first extra
// element), maps key by key in order. Secrets (secret.IsType) and their
// X_file siblings, and the paths in skip (written with [] for any index:
// "listeners[].tls"), are not compared: a reload applies them. Only exported fields are compared; a struct without any
// (time.Time, netip.Prefix) is compared whole.
func firstDiff(path string, a, b reflect.Value, skip map[string]bool) string {
	if skip[anyIndex(path)] {
		return ""
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return path
			}
			return ""
		}
		return firstDiff(path, a.Elem(), b.Elem(), skip)
	case reflect.Struct:
		return structDiff(path, a, b, skip)
	case reflect.Slice, reflect.Array:
		n := min(a.Len(), b.Len())
		for i := 0; i < n; i++ {
			if p := firstDiff(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i), skip); p != "" {
				return p
			}
		}
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s[%d]", path, n)
		}
		return ""
	case reflect.Map:
		keys := map[string]reflect.Value{}
		for _, m := range []reflect.Value{a, b} {
			for _, k := range m.MapKeys() {
				keys[fmt.Sprint(k.Interface())] = k
			}
		}
		names := make([]string, 0, len(keys))
		for n := range keys {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			x, y := a.MapIndex(keys[n]), b.MapIndex(keys[n])
			if !x.IsValid() || !y.IsValid() {
				return path + "." + n
			}
			if p := firstDiff(path+"."+n, x, y, skip); p != "" {
				return p
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return path
	}
	return ""
}

func structDiff(path string, a, b reflect.Value, skip map[string]bool) string {
	t := a.Type()
	secrets := map[string]bool{}
	exported := false
	for i := 0; i < t.NumField(); i++ {
		if sf := t.Field(i); sf.IsExported() {
			exported = true
			if secret.IsType(sf.Type) {
				name, _ := yamlKey(sf)
				secrets[name] = true
			}
		}
	}
	if !exported {
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			return path
		}
		return ""
	}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, inline := yamlKey(sf)
		if !sf.IsExported() || name == "-" || secrets[name] ||
			(strings.HasSuffix(name, secret.FileSuffix) && secrets[strings.TrimSuffix(name, secret.FileSuffix)]) {
			continue
		}
		p := path
		if !inline {
			p = joinPath(path, name)
		}
		if d := firstDiff(p, a.Field(i), b.Field(i), skip); d != "" {
			return d
		}
	}
	return ""
}

// anyIndex writes every list index of path as []: "listeners[2].tls"
// is "listeners[].tls".
func anyIndex(path string) string {
	if !strings.Contains(path, "[") {
		return path
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '[')
		j := strings.IndexByte(path, ']')
		if i < 0 || j < i {
			b.WriteString(path)
			return b.String()
		}
		b.WriteString(path[:i])
		b.WriteString("[]")
		path = path[j+1:]
	}
}

// yamlKey returns a struct field's YAML key ("-" when it has none) and
// whether it is inline.
func yamlKey(sf reflect.StructField) (string, bool) {
	name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	inline := strings.Contains(","+opts+",", ",inline,")
	if name == "" && !inline {
		name = strings.ToLower(sf.Name)
	}
	return name, inline
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
