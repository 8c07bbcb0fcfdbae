// SPDX-License-Identifier: Apache-2.0

package secret

import (
	"fmt"
	"iter"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/fielderr"
)

var (
	stringType = reflect.TypeOf(String(""))
	mapType    = reflect.TypeOf(map[string]String(nil))
	sliceType  = reflect.TypeOf([]String(nil))
)

// isSecret reports whether t is one of the secret field types: a String,
// a map of them (header fields) or a list of them (API keys).
func isSecret(t reflect.Type) bool { return t == stringType || t == mapType || t == sliceType }

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
//
// A String's file holds the value on its first line; a map's, one
// "key=value" per line; a list's, one value per line. In the last two,
// blank lines and lines starting with # are skipped.
func Resolve(v any) error { return ResolveWith(v, os.ReadFile) }

// ResolveWith is Resolve reading the files with read, which a caller
// wraps to learn what was read (the proxy's configuration watch keeps a
// digest of each secret file as it was read, to reload when one
// changes).
func ResolveWith(v any, read func(name string) ([]byte, error)) error {
	return walk(reflect.ValueOf(v), at{}, func(p at, f, file reflect.Value, fileKey string) error {
		return resolveField(p.path, f, file, fileKey, read)
	})
}

// Visit calls fn with the YAML path and the value of every secret field
// set in the configuration v points to; a map's entries are visited as
// path.key, a list's as path[i]. It is for tests and checks that must
// cover every secret.
func Visit(v any, fn func(path string, value String)) {
	_ = walk(reflect.ValueOf(v), at{}, func(p at, f, _ reflect.Value, _ string) error {
		switch f.Type() {
		case stringType:
			if s := f.Interface().(String); s != "" {
				fn(p.path, s)
			}
		case mapType:
			keys := f.MapKeys()
			sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
			for _, k := range keys {
				fn(p.path+"."+k.String(), f.MapIndex(k).Interface().(String))
			}
		case sliceType:
			for i := 0; i < f.Len(); i++ {
				fn(fmt.Sprintf("%s[%d]", p.path, i), f.Index(i).Interface().(String))
			}
		}
		return nil
	})
}

// SetPaths returns, in the form Paths writes them, the paths of the
// secrets set (non-empty) in the configuration v points to, sorted and
// each once. A test that plants a value in every secret compares it
// with Paths of the configuration's type, so that a secret added later
// and not planted fails it.
func SetPaths(v any) []string {
	seen := map[string]bool{}
	_ = walk(reflect.ValueOf(v), at{}, func(p at, f, _ reflect.Value, _ string) error {
		if !isZero(f) {
			seen[p.tpath] = true
		}
		return nil
	})
	return sortedKeys(seen)
}

// Files returns the names of the secret files (every set X_file of a
// secret X) of the configuration v points to, sorted and each once.
func Files(v any) []string {
	seen := map[string]bool{}
	_ = walk(reflect.ValueOf(v), at{}, func(_ at, _, file reflect.Value, _ string) error {
		if file.IsValid() && file.String() != "" {
			seen[file.String()] = true
		}
		return nil
	})
	return sortedKeys(seen)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
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
	for !isSecret(t) && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
		switch t.Kind() {
		case reflect.Slice, reflect.Array:
			path += "[]"
		case reflect.Map:
			path += ".{}"
		}
		t = t.Elem()
	}
	if isSecret(t) {
		*out = append(*out, path)
		return
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	defer delete(seen, t)
	for yf := range yamlFields(t) {
		p := path
		if !yf.inline {
			p = join(path, yf.name)
		}
		typePaths(yf.sf.Type, p, seen, out)
	}
}

// at is where the walk is: the YAML path of a value ("list[1].password")
// and the same path in the form Paths writes ("list[].password").
type at struct{ path, tpath string }

func (a at) key(k string) at   { return at{join(a.path, k), join(a.tpath, k)} }
func (a at) entry(k string) at { return at{join(a.path, k), a.tpath + ".{}"} }
func (a at) index(i int) at    { return at{fmt.Sprintf("%s[%d]", a.path, i), a.tpath + "[]"} }

// fieldFunc handles one secret field f (a String, or a map or list of
// them) at p; file is its sibling X_file field (invalid when the struct
// has none) named fileKey.
type fieldFunc func(p at, f, file reflect.Value, fileKey string) error

func walk(v reflect.Value, p at, fn fieldFunc) error {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		if isSecret(v.Type()) {
			return nil // reached through its struct field
		}
		for i := 0; i < v.Len(); i++ {
			if err := walk(v.Index(i), p.index(i), fn); err != nil {
				return err
			}
		}
	case reflect.Map:
		if isSecret(v.Type()) {
			return nil
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			// Map values are not addressable: walk a copy and store it back.
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			if err := walk(e, p.entry(fmt.Sprint(k)), fn); err != nil {
				return err
			}
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		return walkStruct(v, p, fn)
	}
	return nil
}

func walkStruct(v reflect.Value, p at, fn fieldFunc) error {
	t := v.Type()
	files := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		if name, _, skip := yamlName(t.Field(i)); !skip && strings.HasSuffix(name, FileSuffix) &&
			t.Field(i).Type.Kind() == reflect.String {
			files[name] = i
		}
	}
	for yf := range yamlFields(t) {
		f := v.Field(yf.index)
		fp := p
		if !yf.inline {
			fp = p.key(yf.name)
		}
		if isSecret(yf.sf.Type) {
			var file reflect.Value
			fileKey := yf.name + FileSuffix
			if j, ok := files[fileKey]; ok {
				file = v.Field(j)
			}
			if err := fn(fp, f, file, join(p.path, fileKey)); err != nil {
				return err
			}
			continue
		}
		if err := walk(f, fp, fn); err != nil {
			return err
		}
	}
	return nil
}

func resolveField(path string, f, file reflect.Value, fileKey string, read func(string) ([]byte, error)) error {
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
	b, err := read(name)
	if err != nil {
		return fielderr.Errorf(fileKey, "%q cannot be read: %v", name, unwrapPath(err))
	}
	if !f.CanSet() {
		return fielderr.Errorf(fileKey, "cannot be applied here")
	}
	switch f.Type() {
	case stringType:
		line, _, _ := strings.Cut(string(b), "\n")
		line = strings.TrimSpace(line)
		if line == "" {
			return fielderr.Errorf(fileKey, "%q is empty: put the secret on its first line", name)
		}
		if line == Redacted {
			return fielderr.Errorf(fileKey, "%q holds the placeholder %s that GET /config prints: put the real secret in the file", name, Redacted)
		}
		f.Set(reflect.ValueOf(String(line)))
	case mapType:
		m, err := parsePairs(b)
		if err != nil {
			return fielderr.Errorf(fileKey, "%q: %v", name, err)
		}
		f.Set(reflect.ValueOf(m))
	default:
		l, err := parseLines(b)
		if err != nil {
			return fielderr.Errorf(fileKey, "%q: %v", name, err)
		}
		f.Set(reflect.ValueOf(l))
	}
	return nil
}

// lines calls fn with the number and the trimmed text of every line of b
// that is neither blank nor a comment (starting with #). A file without
// such a line is an error that says to put one per line.
func lines(b []byte, one string, fn func(n int, line string) error) error {
	count := 0
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := fn(i+1, line); err != nil {
			return err
		}
		count++
	}
	if count == 0 {
		return fmt.Errorf("is empty: put %s per line", one)
	}
	return nil
}

// placeholderLine is the error of line n when it holds the placeholder
// that GET /config prints instead of a secret.
func placeholderLine(n int) error {
	return fmt.Errorf("line %d holds the placeholder %s that GET /config prints", n, Redacted)
}

// parsePairs reads "key=value" lines. Errors name the line number, never
// its text.
func parsePairs(b []byte) (map[string]String, error) {
	m := map[string]String{}
	err := lines(b, "one key=value", func(n int, line string) error {
		k, val, ok := strings.Cut(line, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !ok || k == "" {
			return fmt.Errorf("line %d is not key=value", n)
		}
		if _, dup := m[k]; dup {
			return fmt.Errorf("line %d repeats key %q", n, k)
		}
		if val == Redacted {
			return placeholderLine(n)
		}
		m[k] = String(val)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// parseLines reads one secret per line. Errors name the line number,
// never its text.
func parseLines(b []byte) ([]String, error) {
	var l []String
	err := lines(b, "one value", func(n int, line string) error {
		if line == Redacted {
			return placeholderLine(n)
		}
		l = append(l, String(line))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

func checkNotPlaceholder(path string, f reflect.Value) error {
	bad := false
	switch f.Type() {
	case stringType:
		bad = f.String() == Redacted
	case mapType:
		keys := f.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			if f.MapIndex(k).String() == Redacted {
				path, bad = path+"."+k.String(), true
				break
			}
		}
	default:
		for i := 0; i < f.Len(); i++ {
			if f.Index(i).String() == Redacted {
				path, bad = fmt.Sprintf("%s[%d]", path, i), true
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
	if f.Kind() == reflect.Map || f.Kind() == reflect.Slice {
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

// yamlField is a field of a struct that YAML reads.
type yamlField struct {
	index  int
	sf     reflect.StructField
	name   string // its YAML key
	inline bool   // its own fields are keys of the parent
}

// yamlFields yields, in order, the exported fields of the struct type t
// that YAML reads (those not tagged "-").
func yamlFields(t reflect.Type) iter.Seq[yamlField] {
	return func(yield func(yamlField) bool) {
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name, inline, skip := yamlName(sf)
			if skip {
				continue
			}
			if !yield(yamlField{i, sf, name, inline}) {
				return
			}
		}
	}
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

// IsType reports whether t is the type of a secret field: a String, or a
// map or a list of them.
func IsType(t reflect.Type) bool { return isSecret(t) }
