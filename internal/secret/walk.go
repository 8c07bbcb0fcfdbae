package secret

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/fielderr"
)

var (
	stringType = reflect.TypeOf(String(""))
	mapType    = reflect.TypeOf(map[string]String(nil))
)

// FileSuffix is the suffix of the YAML key of a secret's file form:
// "token" and "token_file", "headers" and "headers_file".
const FileSuffix = "_file"

// Resolve reads the file form of every secret in the configuration that
// v points to (a struct, followed through pointers, slices, arrays, maps
// of structs and inline structs): for each secret field with YAML key X
// and a set sibling X_file, it sets the secret from the file. A secret
// given both inline and as a file, a file that cannot be read or is
// empty, and a secret equal to Redacted (a GET /config output pasted
// back) are errors: a *sluice.FieldError naming the field's YAML path and
// the file, never the value.
func Resolve(v any) error {
	return walk(reflect.ValueOf(v), "", resolveField)
}

// Visit calls fn with the YAML path and the value of every secret field
// set in the configuration v points to; a map's entries are visited as
// path.key. It is for tests and checks that must cover every secret.
func Visit(v any, fn func(path string, value String)) {
	_ = walk(reflect.ValueOf(v), "", func(path string, f, _ reflect.Value, _ string) error {
		switch f.Type() {
		case stringType:
			if s := f.Interface().(String); s != "" {
				fn(path, s)
			}
		case mapType:
			keys := f.MapKeys()
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			for _, k := range keys {
				fn(path+"."+k.String(), f.MapIndex(k).Interface().(String))
			}
		}
		return nil
	})
}

// Paths returns the YAML path of every secret field of the type of v (a
// struct or a pointer to one), whether set or not; a slice's elements are
// written [], a map of structs' entries {}. Tests use it to check that
// they reach every secret, including one added later.
func Paths(v any) []string {
	var out []string
	typePaths(reflect.TypeOf(v), "", map[reflect.Type]bool{}, &out)
	sort.Strings(out)
	return out
}

func typePaths(t reflect.Type, path string, seen map[reflect.Type]bool, out *[]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		switch t.Kind() {
		case reflect.Slice, reflect.Array:
			path += "[]"
		case reflect.Map:
			if t == mapType {
				*out = append(*out, path)
				return
			}
			path += ".{}"
		}
		t = t.Elem()
	}
	if t == stringType {
		*out = append(*out, path)
		return
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	defer delete(seen, t)
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, inline, skip := yamlName(sf)
		if skip {
			continue
		}
		p := path
		if !inline {
			p = join(path, name)
		}
		typePaths(sf.Type, p, seen, out)
	}
}

// fieldFunc handles one secret field f (a String or a map of them) at
// path; file is its sibling X_file field (invalid when the struct has
// none) named fileKey.
type fieldFunc func(path string, f, file reflect.Value, fileKey string) error

func walk(v reflect.Value, path string, fn fieldFunc) error {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if err := walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i), fn); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.Type() == mapType {
			return nil // reached through its struct field
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			// Map values are not addressable: walk a copy and store it back.
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			if err := walk(e, join(path, fmt.Sprint(k)), fn); err != nil {
				return err
			}
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		return walkStruct(v, path, fn)
	}
	return nil
}

func walkStruct(v reflect.Value, path string, fn fieldFunc) error {
	t := v.Type()
	files := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		if name, _, skip := yamlName(t.Field(i)); !skip && strings.HasSuffix(name, FileSuffix) &&
			t.Field(i).Type.Kind() == reflect.String {
			files[name] = i
		}
	}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, inline, skip := yamlName(sf)
		if skip {
			continue
		}
		f := v.Field(i)
		p := path
		if !inline {
			p = join(path, name)
		}
		if sf.Type == stringType || sf.Type == mapType {
			var file reflect.Value
			fileKey := name + FileSuffix
			if j, ok := files[fileKey]; ok {
				file = v.Field(j)
			}
			if err := fn(p, f, file, join(path, fileKey)); err != nil {
				return err
			}
			continue
		}
		if err := walk(f, p, fn); err != nil {
			return err
		}
	}
	return nil
}

func resolveField(path string, f, file reflect.Value, fileKey string) error {
	name := ""
	if file.IsValid() {
		name = file.String()
	}
	if name == "" {
		return checkNotPlaceholder(path, f)
	}
	if !isZero(f) {
		return fielderr.Errorf(fileKey, "is set with %s: give one of them", lastKey(path))
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return fielderr.Errorf(fileKey, "%q cannot be read: %v", name, unwrapPath(err))
	}
	if !f.CanSet() {
		return fielderr.Errorf(fileKey, "cannot be applied here")
	}
	if f.Type() == stringType {
		line, _, _ := strings.Cut(string(b), "\n")
		line = strings.TrimSpace(line)
		if line == "" {
			return fielderr.Errorf(fileKey, "%q is empty: put the secret on its first line", name)
		}
		if line == Redacted {
			return fielderr.Errorf(fileKey, "%q holds the placeholder %s that GET /config prints: put the real secret in the file", name, Redacted)
		}
		f.Set(reflect.ValueOf(String(line)))
		return nil
	}
	m, err := parsePairs(b)
	if err != nil {
		return fielderr.Errorf(fileKey, "%q: %v", name, err)
	}
	f.Set(reflect.ValueOf(m))
	return nil
}

// parsePairs reads "key=value" lines (blank lines and lines starting with
// # skipped). Errors name the line number, never its text.
func parsePairs(b []byte) (map[string]String, error) {
	m := map[string]String{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, val, ok := strings.Cut(line, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !ok || k == "" {
			return nil, fmt.Errorf("line %d is not key=value", i+1)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("line %d repeats key %q", i+1, k)
		}
		if val == Redacted {
			return nil, fmt.Errorf("line %d holds the placeholder %s that GET /config prints", i+1, Redacted)
		}
		m[k] = String(val)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("is empty: put one key=value per line")
	}
	return m, nil
}

func checkNotPlaceholder(path string, f reflect.Value) error {
	bad := false
	if f.Type() == stringType {
		bad = f.String() == Redacted
	} else {
		for _, k := range f.MapKeys() {
			if f.MapIndex(k).String() == Redacted {
				path, bad = path+"."+k.String(), true
				break
			}
		}
	}
	if bad {
		return fielderr.Errorf(path, "is the placeholder %s that GET /config prints: give the real secret, or its %s form", Redacted, FileSuffix)
	}
	return nil
}

func isZero(f reflect.Value) bool {
	if f.Kind() == reflect.Map {
		return f.Len() == 0
	}
	return f.IsZero()
}

// unwrapPath drops the *os.PathError's repetition of the file name.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func yamlName(sf reflect.StructField) (name string, inline, skip bool) {
	tag := sf.Tag.Get("yaml")
	if tag == "-" {
		return "", false, true
	}
	name, opts, _ := strings.Cut(tag, ",")
	inline = strings.Contains(","+opts+",", ",inline,")
	if name == "" && !inline {
		name = strings.ToLower(sf.Name)
	}
	return name, inline, false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func lastKey(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}
