// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"fmt"
	"reflect"
	"strings"
)

// CheckStruct checks the defaults stated in the field comments of s
// against c, whose Root is the defaulted struct. A comment's statement
// belongs to its field; one with several values to its fields in order
// ("MinRate, MaxRate … (defaults 10 and 100000)"); in a comment with
// several statements, each belongs to the field named last before it
// ("CoDelTarget … (default 5ms); CoDelInterval … (default 100ms)").
func (c *Context) CheckStruct(s *Struct) []Finding {
	var out []Finding
	for _, g := range s.Groups {
		sts := Statements(g.Doc.S, false)
		if len(sts) == 0 {
			continue
		}
		ms := c.findMentions(g.Doc.S, c.groupSpellings(g))
		for _, st := range sts {
			pos := g.Doc.Pos(st.At)
			n := plural(len(st.Lits))
			var keys []string
			single := len(g.Fields) == 1 && !g.Fields[0].Embedded
			switch {
			case n >= 2 && n == len(g.Fields) && len(sts) == 1:
				for _, f := range g.Fields {
					keys = append(keys, f.Name)
				}
			case single && len(sts) == 1:
				keys = []string{g.Fields[0].Name}
			default:
				keys = nearest(ms, 0, st.KeyEnd, n)
				if len(keys) != n && single && n == 1 {
					keys = []string{g.Fields[0].Name}
				}
			}
			if len(keys) != n {
				out = append(out, Finding{Pos: pos, Msg: fmt.Sprintf("%q: cannot tell which field of %s it is the default of; name the field before it", st.Text, s.Name)})
				continue
			}
			out = append(out, c.assign(pos, keys, st)...)
		}
	}
	return out
}

// groupSpellings returns the names of a group's fields (Go and YAML, and
// the fields of an inline struct), and the aliases.
func (c *Context) groupSpellings(g Group) []string {
	var sp []string
	for _, f := range g.Fields {
		sp = append(sp, f.Name, f.YAML)
		if f.Embedded || f.Inline {
			if fv := deref(c.Root).FieldByName(f.Name); fv.IsValid() {
				sp = append(sp, Names(fv)...)
			}
		}
	}
	for k := range c.Aliases {
		sp = append(sp, k)
	}
	for k := range c.Extra {
		sp = append(sp, k)
	}
	out := sp[:0]
	for _, s := range sp {
		if s != "" {
			out = append(out, s)
		}
	}
	sortLongestFirst(out)
	return out
}

func sortLongestFirst(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && len(s[j]) > len(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// CheckProse checks the defaults stated in a comment that is not a field's
// (a package or function doc comment): each statement belongs to the key
// named last before it in its sentence. With pairs, "key value" and
// "key = value" also state defaults (a Default…Config function's list,
// "util_ref 90 %, Kp 1/5"), and every number in the comment must belong to
// one: a number the checker cannot map fails.
func (c *Context) CheckProse(t *Text, pairs bool) []Finding {
	var out []Finding
	spellings := c.mentions()
	if !pairs {
		// In free prose a YAML key that is an English word ("period",
		// "parallel") is no mention; Go names, "Type.Field", keys with
		// '_' or '.' and aliases are.
		kept := spellings[:0:0]
		for _, sp := range spellings {
			if _, alias := c.Aliases[sp]; alias || strings.ContainsAny(sp, "_.") || sp != strings.ToLower(sp) {
				kept = append(kept, sp)
			}
		}
		spellings = kept
	}
	ms := c.findMentions(t.S, spellings)
	sts := Statements(t.S, false)
	inStatement := func(i int) bool {
		for _, st := range sts {
			if i >= st.At && i < st.End {
				return true
			}
		}
		return false
	}
	for _, st := range sts {
		if st.Phrase != "" {
			if fs, ok := c.phrasePairs(t, ms, st); ok {
				out = append(out, fs...)
				continue
			}
		}
		n := plural(len(st.Lits))
		keys := nearest(ms, SentenceStart(t.S, st.KeyEnd), st.KeyEnd, n)
		if len(keys) != n {
			out = append(out, Finding{Pos: t.Pos(st.At), Msg: fmt.Sprintf("%q: cannot tell which field it is the default of; name the field before it", st.Text)})
			continue
		}
		out = append(out, c.assign(t.Pos(st.At), keys, st)...)
	}
	if !pairs {
		return out
	}
	s := t.S
	for i := 0; i < len(s); {
		if i > 0 && (isWordRune(lastRune(s[:i])) || strings.ContainsRune(".-−/", lastRune(s[:i]))) {
			i += runeLen(s[i:])
			continue
		}
		lit, n, ok := ParseLiteral(s[i:])
		if !ok || lit.Kind == Zero || lit.Kind == List || lit.Kind == String && !strings.HasPrefix(lit.Text, `"`) {
			i += runeLen(s[i:])
			continue
		}
		if inStatement(i) {
			i += n
			continue
		}
		key := keyBefore(ms, s, i)
		switch {
		case key != "":
			out = append(out, c.compare(t.Pos(i), key, &lit, "", "")...)
		case lit.Kind == Number && !reference(s[:i]):
			out = append(out, Finding{Pos: t.Pos(i), Msg: fmt.Sprintf("the number %s in this comment is no default the checker can map: write it as \"field value\" or leave it out", lit.Text)})
		}
		i += n
	}
	return out
}

// phrasePairs reads a phrase statement made of "key value" pairs, "(default
// bucket 20, initial rate 1000 connections/s)". ok is false unless every
// number in it follows a key.
func (c *Context) phrasePairs(t *Text, ms []mention, st Statement) (out []Finding, ok bool) {
	s := t.S[:st.End]
	pairs := 0
	for i := st.At; i < st.End; {
		if i > st.At && isWordRune(lastRune(s[:i])) {
			i += runeLen(s[i:])
			continue
		}
		lit, n, isLit := ParseLiteral(s[i:])
		if !isLit || lit.Kind != Number {
			i += runeLen(s[i:])
			continue
		}
		key := keyBefore(ms, s, i)
		if key == "" {
			return nil, false
		}
		pairs++
		out = append(out, c.compare(t.Pos(i), key, &lit, "", "")...)
		i += n
	}
	return out, pairs > 0
}

func runeLen(s string) int {
	for i := range s {
		if i > 0 {
			return i
		}
	}
	return len(s)
}

// keyBefore returns the key mentioned right before i, separated from it
// by " ", " = " or ": ".
func keyBefore(ms []mention, s string, i int) string {
	for _, sep := range []string{" = ", ": ", "=", " "} {
		if !strings.HasSuffix(s[:i], sep) {
			continue
		}
		end := i - len(sep)
		for _, m := range ms {
			if m.end == end {
				return m.key
			}
		}
	}
	return ""
}

// reference reports whether a number follows a reference to a figure,
// table or section ("Figure 4", "§3.3").
func reference(before string) bool {
	before = strings.TrimRight(before, " ")
	for _, r := range []string{"Figure", "Fig.", "§", "Table", "Eq.", "Section", "issue", "PR"} {
		if strings.HasSuffix(before, r) {
			return true
		}
	}
	return false
}

// Fields returns the names of s's fields (for a registry's completeness
// check).
func (s *Struct) Fields() []string {
	var out []string
	for _, g := range s.Groups {
		for _, f := range g.Fields {
			out = append(out, f.Name)
		}
	}
	return out
}

// States reports whether a comment of s states a default.
func (s *Struct) States() bool {
	for _, g := range s.Groups {
		if len(Statements(g.Doc.S, false)) > 0 {
			return true
		}
	}
	return false
}

// TypeName returns the name of v's type, pointers followed.
func TypeName(v reflect.Value) string { return derefType(v.Type()).Name() }
