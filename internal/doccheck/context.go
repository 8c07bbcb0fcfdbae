// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"
)

// Finding is a stated default that differs from the real one, or that the
// checker cannot map to a field.
type Finding struct {
	Pos    string // file:line
	Key    string // the key the statement was mapped to, when it was
	Stated string // the value as written
	Real   string // the real default, when known
	Msg    string
}

func (f Finding) String() string {
	s := f.Pos + ": "
	if f.Key != "" {
		s += f.Key + ": "
	}
	if f.Real != "" {
		return s + fmt.Sprintf("states %s, the default is %s", f.Stated, f.Real)
	}
	return s + f.Msg
}

// Derived is a default stated as a phrase ("a quarter of Period", "host
// name and pid") rather than a value. Check verifies what the phrase says
// against the code; a nil Check requires the real value to be zero (the
// phrase says what zero means).
type Derived struct {
	Phrase string // the phrase as written, or its start
	Check  func() error
}

// Context resolves the keys a document uses to real default values.
type Context struct {
	// Root is the defaulted configuration keys are looked up in (YAML or Go
	// names, see Find).
	Root reflect.Value
	// Prefix is tried before a key: "backends.queue." in that section.
	Prefix string
	// Self is the key of a statement that names none ("Default `30s`."
	// under the heading drain_timeout).
	Self string
	// Roots gives another root for a key (after Prefix), for defaults that
	// depend on another field: the utilization header with source
	// backend-header.
	Roots map[string]reflect.Value
	// Aliases map a key as written (Kp_q, "initial rate") to keys.
	Aliases map[string][]string
	// Extra are keys outside Root, with their values.
	Extra map[string]reflect.Value
	// Derived are the phrases stated as defaults, by key (after Prefix).
	Derived map[string]Derived
	// Ignore are texts that look like defaults but are not (an
	// experiment's setting), with the reason.
	Ignore map[string]string
	// Mutate names a key whose real default is replaced by another value
	// of its type before it is compared: a test of the checker sets it to
	// prove that a change of that default would be caught.
	Mutate string

	used     map[string]bool
	checked  map[string]bool
	spelling []string          // mentions, once
	leafs    map[string][]leaf // leaves of Root ("") and of Roots
}

// leavesOf returns the leaves of Root, or of Roots[k] when it has one.
func (c *Context) leavesOf(k string) []leaf {
	if c.leafs == nil {
		c.leafs = map[string][]leaf{}
	}
	root, id := c.Root, ""
	if r, ok := c.Roots[k]; ok {
		root, id = r, k
	}
	if !root.IsValid() {
		return nil
	}
	ls, ok := c.leafs[id]
	if !ok {
		ls = leaves(root)
		c.leafs[id] = ls
	}
	return ls
}

// Checked returns the keys whose stated defaults were compared with a
// real value (derived defaults excluded), sorted.
func (c *Context) Checked() []string {
	out := make([]string, 0, len(c.checked))
	for k := range c.checked {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type resolved struct {
	key  string // canonical key: Prefix+key, the alias target, or key
	vals []reflect.Value
}

// resolve returns the values key names, or nil.
func (c *Context) resolve(key string) []resolved {
	key = strings.Trim(key, "`")
	if targets, ok := c.Aliases[key]; ok {
		var out []resolved
		for _, t := range targets {
			r := c.resolveKey(t)
			if r == nil {
				return nil
			}
			out = append(out, r...)
		}
		return out
	}
	return c.resolveKey(key)
}

// resolveKey resolves a key without aliases.
func (c *Context) resolveKey(key string) []resolved {
	for _, k := range []string{c.Prefix + key, key} {
		if v, ok := c.Extra[k]; ok {
			return []resolved{{k, []reflect.Value{v}}}
		}
		if vs := findIn(c.leavesOf(k), k); len(vs) > 0 {
			return []resolved{{k, vs}}
		}
	}
	return nil
}

// mentions returns the spellings of keys to look for in plain text.
func (c *Context) mentions() []string {
	if c.spelling != nil {
		return c.spelling
	}
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, n := range names(c.leavesOf("")) {
		add(n)
	}
	for k := range c.Aliases {
		add(k)
	}
	for k := range c.Extra {
		add(k)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) || len(out[i]) == len(out[j]) && out[i] < out[j] })
	c.spelling = out
	return out
}

func (c *Context) mark(kind, k string) {
	if c.used == nil {
		c.used = map[string]bool{}
	}
	c.used[kind+"\x00"+k] = true
}

// Unused reports the Derived and Ignore entries no statement used: a
// phrase or an exception that the document no longer has.
func (c *Context) Unused(where string) []Finding {
	var out []Finding
	for k, d := range c.Derived {
		if !c.used["d\x00"+k] {
			out = append(out, Finding{Pos: where, Key: k, Msg: fmt.Sprintf("no statement uses the derived default %q: remove it from the checker", d.Phrase)})
		}
	}
	for k := range c.Ignore {
		if !c.used["i\x00"+k] {
			out = append(out, Finding{Pos: where, Msg: fmt.Sprintf("no text matches the exception %q: remove it from the checker", k)})
		}
	}
	return out
}

// ignored reports whether text is one of the exceptions.
func (c *Context) ignored(text string) bool {
	for k := range c.Ignore {
		if strings.Contains(text, k) {
			c.mark("i", k)
			return true
		}
	}
	return false
}

// compare checks one stated literal (or phrase, when lit is nil) against
// the default of key, and returns the findings. raw is the text from the
// value on, to compare a string written bare.
func (c *Context) compare(pos, key string, lit *Literal, phrase, raw string) []Finding {
	rs := c.resolve(key)
	stated := phrase
	if lit != nil {
		stated = lit.Text
	}
	if rs == nil {
		return []Finding{{Pos: pos, Key: key, Msg: fmt.Sprintf("states %s as a default but %q names no field here: rewrite it or teach the checker the key", stated, key)}}
	}
	var out []Finding
	for _, r := range rs {
		for _, v := range r.vals {
			if d, ok := c.Derived[r.key]; ok && phrase != "" && strings.HasPrefix(strings.Trim(phrase, "`"), strings.Trim(d.Phrase, "`")) {
				c.mark("d", r.key)
				if err := d.check(stated, v); err != nil {
					out = append(out, Finding{Pos: pos, Key: r.key, Msg: err.Error()})
				}
				continue
			}
			if c.checked == nil {
				c.checked = map[string]bool{}
			}
			c.checked[r.key] = true
			if c.Mutate == r.key {
				v = perturb(v)
			}
			res := NotAValue
			if lit != nil {
				res = Compare(*lit, v)
			}
			if dv := deref(v); dv.Kind() == reflect.String && dv.String() != "" && raw != "" &&
				(lit == nil || lit.Kind == Number || lit.Kind == Bool || lit.Kind == Zero) {
				// A string written bare: X-Sluice-Quality, text/plain;
				// charset=utf-8, 127.0.0.1:9901.
				res = Differ
				if strings.HasPrefix(raw, dv.String()) && endsValue(raw, len(dv.String())) {
					res = Equal
				}
				stated = firstToken(raw)
			}
			switch res {
			case Equal:
			case Differ:
				out = append(out, Finding{Pos: pos, Key: r.key, Stated: stated, Real: Format(v)})
			default:
				out = append(out, Finding{Pos: pos, Key: r.key, Msg: fmt.Sprintf("states %q, which is no value of its type (%s): add a derived check of what it says or rewrite it", stated, v.Type())})
			}
		}
	}
	return out
}

// check runs a derived default's check.
func (d Derived) check(stated string, v reflect.Value) error {
	if d.Check != nil {
		return d.Check()
	}
	if dv := deref(v); !dv.IsZero() && !(dv.Kind() == reflect.Slice && dv.Len() == 0) {
		return fmt.Errorf("states %q, which means zero, but the default is %s", stated, Format(v))
	}
	return nil
}

// endsValue reports whether a bare value ends at i of s.
func endsValue(s string, i int) bool {
	if i >= len(s) {
		return true
	}
	switch s[i] {
	case ' ', ')', ']', ',', ';':
		return true
	case '.', ':':
		return i+1 == len(s) || s[i+1] == ' '
	}
	return false
}

// firstToken returns s up to the end of its first bare value.
func firstToken(s string) string {
	for i := range s {
		if i > 0 && endsValue(s, i) {
			return s[:i]
		}
	}
	return s
}

// assign checks a statement's literals against keys: one literal per key,
// or one for all.
func (c *Context) assign(pos string, keys []string, st Statement) []Finding {
	if st.Phrase != "" {
		var out []Finding
		for _, k := range keys {
			out = append(out, c.compare(pos, k, nil, st.Phrase, st.Rest)...)
		}
		return out
	}
	switch {
	case len(st.Lits) == len(keys):
		var out []Finding
		for i, k := range keys {
			lit := st.Lits[i]
			raw := ""
			if len(keys) == 1 {
				raw = st.Rest
			}
			out = append(out, c.compare(pos, k, &lit, phraseOf(st), raw)...)
		}
		return out
	case len(st.Lits) == 1:
		var out []Finding
		for _, k := range keys {
			lit := st.Lits[0]
			out = append(out, c.compare(pos, k, &lit, phraseOf(st), st.Rest)...)
		}
		return out
	}
	return []Finding{{Pos: pos, Msg: fmt.Sprintf("%q states %d values for %d keys %v", st.Text, len(st.Lits), len(keys), keys)}}
}

// phraseOf returns the phrase a single-value statement may match a
// derived default with: its clause ("3 periods, at least 2 periods",
// "`period/4`").
func phraseOf(st Statement) string {
	if len(st.Lits) != 1 {
		return ""
	}
	if st.Clause != "" {
		return st.Clause
	}
	return strings.Trim(st.Lits[0].Text, "`")
}

// mention is a key found in text.
type mention struct {
	key        string
	start, end int
}

// findMentions returns the keys of c named in plain text, longest first
// where they overlap.
func (c *Context) findMentions(text string, spellings []string) []mention {
	var out []mention
	covered := make([]bool, len(text))
	for _, s := range spellings {
		for i := 0; ; {
			k := strings.Index(text[i:], s)
			if k < 0 {
				break
			}
			start, end := i+k, i+k+len(s)
			i = start + 1
			if !plainBoundary(text, start, end) || covered[start] || covered[end-1] {
				continue
			}
			for j := start; j < end; j++ {
				covered[j] = true
			}
			out = append(out, mention{s, start, end})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

func plainBoundary(text string, start, end int) bool {
	if start > 0 {
		r := lastRune(text[:start])
		if isWordRune(r) || r == '.' {
			return false
		}
	}
	if end < len(text) {
		r, _ := utf8.DecodeRuneInString(text[end:])
		if isWordRune(r) || r == '.' && end+1 < len(text) && text[end+1] != ' ' {
			return false
		}
	}
	return true
}

// nearest returns the last n mentions ending before end and after from.
func nearest(ms []mention, from, end, n int) []string {
	var keys []string
	for i := len(ms) - 1; i >= 0 && len(keys) < n; i-- {
		if ms[i].end <= end && ms[i].start >= from {
			keys = append([]string{ms[i].key}, keys...)
		}
	}
	return keys
}

func plural(n int) int { return max(n, 1) }

// Merge returns one Context for the prose of a package that several
// contexts (one per type, by type name) describe: "CacheSize" and
// "Config.CacheSize" both reach share.Config's field.
func Merge(byType map[string]*Context) *Context {
	parts := map[string]any{}
	m := &Context{Aliases: map[string][]string{}, Extra: map[string]reflect.Value{}, Derived: map[string]Derived{}}
	for name, c := range byType {
		parts[name] = c.Root.Interface()
		for a, ts := range c.Aliases {
			for _, t := range ts {
				m.Aliases[a] = append(m.Aliases[a], name+"."+t)
			}
		}
		for k, v := range c.Extra {
			m.Extra[k] = v
		}
	}
	m.Root = Tree(parts)
	return m
}

// perturb returns another value of v's type: numbers doubled plus one,
// booleans flipped, strings and lists extended, a nil pointer set.
func perturb(v reflect.Value) reflect.Value {
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		if !v.IsNil() {
			p.Elem().Set(perturb(v.Elem()))
		}
		return p
	}
	out := reflect.New(v.Type()).Elem()
	switch {
	case v.CanInt():
		out.SetInt(2*v.Int() + 1)
	case v.CanUint():
		out.SetUint(2*v.Uint() + 1)
	case v.CanFloat():
		out.SetFloat(2*v.Float() + 1)
	case v.Kind() == reflect.Bool:
		out.SetBool(!v.Bool())
	case v.Kind() == reflect.String:
		out.SetString(v.String() + "x")
	case v.Kind() == reflect.Slice:
		out.Set(reflect.Append(reflect.AppendSlice(reflect.MakeSlice(v.Type(), 0, v.Len()+1), v), reflect.Zero(v.Type().Elem())))
	case v.Kind() == reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.Zero(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		out.Set(m)
	case v.Kind() == reflect.Func:
		out.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value {
			res := make([]reflect.Value, v.Type().NumOut())
			for i := range res {
				res[i] = reflect.Zero(v.Type().Out(i))
			}
			return res
		}))
	default:
		return v
	}
	return out
}
