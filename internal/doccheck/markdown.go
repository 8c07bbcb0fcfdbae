// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"fmt"
	"regexp"
	"strings"
)

// Block is a paragraph, a list item or a table of a Markdown document,
// with the headings above it.
type Block struct {
	// Headings are the titles of the enclosing sections, outermost first,
	// without their anchors ("backends", "backends.queue").
	Headings []string
	Text     *Text  // a paragraph or list item, lines joined
	Table    *Table // or a table
}

// Section returns the innermost heading, "" before the first.
func (b *Block) Section() string {
	if len(b.Headings) == 0 {
		return ""
	}
	return b.Headings[len(b.Headings)-1]
}

// Table is a Markdown table.
type Table struct {
	Header []string
	Rows   [][]*Text // cells
}

var (
	reHeading  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*(\{#[^}]*\})?\s*$`)
	reListItem = regexp.MustCompile(`^\s*(?:[-*+]|\d+\.)\s+`)
	reKeySpan  = regexp.MustCompile(`^[\pL_-][\pL\pN_.\[\]-]*$`)
)

// ParseMarkdown splits a document into blocks. Fenced code is skipped.
func ParseMarkdown(file, src string) []Block {
	var out []Block
	var heads []string
	var cur *Text
	var tbl *Table
	flush := func() {
		if cur != nil {
			out = append(out, Block{Headings: append([]string(nil), heads...), Text: cur})
			cur = nil
		}
		if tbl != nil {
			out = append(out, Block{Headings: append([]string(nil), heads...), Table: tbl})
			tbl = nil
		}
	}
	fence := false
	for i, line := range strings.Split(src, "\n") {
		n := i + 1
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "```") {
			flush()
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		if m := reHeading.FindStringSubmatch(line); m != nil {
			flush()
			heads = underHeading(heads, m)
			continue
		}
		if strings.HasPrefix(trim, "|") {
			if cur != nil {
				flush()
			}
			cells := splitRow(trim)
			switch {
			case tbl == nil:
				tbl = &Table{Header: cellTexts(cells)}
			case isRule(cells):
			default:
				row := make([]*Text, len(cells))
				for j, c := range cells {
					row[j] = &Text{File: file}
					row[j].add(n, c)
				}
				tbl.Rows = append(tbl.Rows, row)
			}
			continue
		}
		if tbl != nil {
			flush()
		}
		if trim == "" || trim == "---" {
			flush()
			continue
		}
		if reListItem.MatchString(line) {
			flush()
		}
		if cur == nil {
			cur = &Text{File: file}
		}
		cur.add(n, trim)
	}
	flush()
	return out
}

func splitRow(s string) []string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "|")
	s = strings.TrimSuffix(s, "|")
	var cells []string
	code := false
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '`':
			code = !code
		case '|':
			if !code {
				cells = append(cells, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(cells, strings.TrimSpace(s[start:]))
}

func cellTexts(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = strings.ToLower(strings.TrimSpace(c))
	}
	return out
}

func isRule(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" {
			return false
		}
	}
	return true
}

// Rule says how to read one block of a document: the Context its keys
// resolve in, and whether "`key` value" pairs state defaults there (not in
// a list of metrics or of the quick start's settings).
type Rule struct {
	Context *Context
	NoPairs bool
}

// CheckMarkdown checks every default stated in the blocks. rule returns
// the Rule of a block, or nil for a block whose section has none; a
// default stated there fails.
//
// A document states defaults in
//
//   - tables headed | field | default | meaning |, one row per key (a cell
//     with several keys and as many values pairs them in order);
//   - pairs "`key` value", "`key` (value", "`key` = value" and
//     "`a` and `b` value" (and "`degrade: {quality_min 0.1, …}`");
//   - code spans "`key = value`", "`a = key = value`", "`{a, b} = {x, y}`"
//     and lists of them "`a = 1, b = 2`";
//   - prose statements (see Statements), which belong to the key named
//     last before them in their sentence, or to the section's Context.Self.
func CheckMarkdown(blocks []Block, rule func(b *Block) *Rule) []Finding {
	var out []Finding
	for i := range blocks {
		b := &blocks[i]
		r := rule(b)
		if b.Table != nil {
			out = append(out, checkTable(b, r)...)
			continue
		}
		out = append(out, checkMDText(b.Text, r, b.Section())...)
	}
	return out
}

func checkTable(b *Block, r *Rule) []Finding {
	var out []Finding
	t := b.Table
	field := len(t.Header) >= 3 && t.Header[0] == "field" && t.Header[1] == "default"
	for _, row := range t.Rows {
		if field && len(row) >= 2 {
			out = append(out, checkFieldRow(row, r, b.Section())...)
			for _, c := range row[2:] {
				out = append(out, checkMDText(c, r, b.Section(), rowKeys(row[0])...)...)
			}
			continue
		}
		for _, c := range row {
			out = append(out, checkMDText(c, r, b.Section())...)
		}
	}
	return out
}

// checkFieldRow checks one row of a | field | default | meaning | table.
func checkFieldRow(row []*Text, r *Rule, section string) []Finding {
	keyCell, defCell := row[0], row[1]
	pos := keyCell.Pos(0)
	keys := rowKeys(keyCell)
	cell := strings.TrimSpace(defCell.S)
	if cell == "" || len(keys) == 0 {
		return nil
	}
	if r == nil || r.Context == nil {
		return []Finding{{Pos: pos, Msg: fmt.Sprintf("a table in section %q states defaults but the checker has no context for it", section)}}
	}
	c := r.Context
	lits, n := ParseList(cell)
	rest := strings.TrimSpace(cell[n:])
	st := Statement{Lits: lits, Text: cell}
	switch {
	case len(lits) > 0 && lits[0].Kind == Zero:
		st.Lits = lits[:1]
	case len(lits) > 0 && (rest == "" || strings.HasPrefix(rest, "(")):
	default:
		st = Statement{Phrase: cell, Text: cell}
	}
	return c.assign(pos, keys, st)
}

// rowKeys returns the keys of a field table's row.
func rowKeys(keyCell *Text) []string {
	var keys []string
	for _, sp := range CodeSpans(keyCell.S) {
		keys = append(keys, keyCell.S[sp[0]+1:sp[1]-1])
	}
	return keys
}

var reYAMLSpan = regexp.MustCompile(`^([\pL_][\pL\pN_.]*):\s*(.+)$`)

// checkMDText checks the prose of a paragraph, list item or table cell.
// A statement that names no key belongs to self (the row's keys in a
// field table), else to the section's Context.Self.
func checkMDText(t *Text, r *Rule, section string, self ...string) []Finding {
	m := newMDText(t, r, section)
	out := m.statements(self)
	if r != nil && r.NoPairs {
		return out
	}
	out = append(out, m.pairs()...)
	return append(out, m.spanAssignments()...)
}

// mdText is one piece of prose being checked: its statements of defaults,
// its code spans and the spans among them that name a key.
type mdText struct {
	t           *Text
	s           string
	section     string
	ctx         *Context // nil: the section has no context
	sts         []Statement
	spans       [][2]int
	keyMentions []mention
}

func newMDText(t *Text, r *Rule, section string) *mdText {
	m := &mdText{t: t, s: t.S, section: section, sts: Statements(t.S, true), spans: CodeSpans(t.S)}
	if r != nil {
		m.ctx = r.Context
	}
	m.keyMentions = make([]mention, 0, len(m.spans))
	for _, sp := range m.spans {
		if k := m.s[sp[0]+1 : sp[1]-1]; reKeySpan.MatchString(k) {
			m.keyMentions = append(m.keyMentions, mention{k, sp[0], sp[1]})
		}
	}
	return m
}

// noContext reports what at pos, in a section the checker has no context
// for.
func (m *mdText) noContext(pos, what string) Finding {
	return Finding{Pos: pos, Msg: fmt.Sprintf("%s in section %q, for which the checker has no context", what, m.section)}
}

// inStatement reports whether byte i lies inside one of the statements.
func (m *mdText) inStatement(i int) bool {
	for _, st := range m.sts {
		if i >= st.At && i < st.End {
			return true
		}
	}
	return false
}

// statements checks the statements of defaults ("(default 100)").
func (m *mdText) statements(self []string) []Finding {
	var out []Finding
	ctx, s := m.ctx, m.s
	for _, st := range m.sts {
		pos := m.t.Pos(st.At)
		if ctx != nil && ctx.ignored(st.Text) {
			continue
		}
		if ctx == nil {
			out = append(out, m.noContext(pos, fmt.Sprintf("%q states a default", st.Text)))
			continue
		}
		if len(st.Lits) == 1 && st.Lits[0].Kind == String {
			// "`trust: trusted` (default)": the key is in the span.
			if kv := reYAMLSpan.FindStringSubmatch(st.Lits[0].Str); kv != nil {
				lit, n, ok := ParseLiteral(kv[2])
				if !ok || n != len(kv[2]) {
					lit = Literal{Kind: String, Str: kv[2], Text: kv[2]}
				}
				out = append(out, ctx.compare(pos, kv[1], &lit, "", "")...)
				continue
			}
		}
		n := plural(len(st.Lits))
		keys := nearest(m.keyMentions, SentenceStart(s, st.KeyEnd), st.KeyEnd, n)
		if len(keys) == 0 && len(self) > 0 {
			keys = self
		}
		if len(keys) == 0 && ctx.Self != "" {
			keys = []string{ctx.Self}
		}
		if len(keys) != n && !(len(keys) == 1 && len(st.Lits) == 0) {
			out = append(out, Finding{Pos: pos, Msg: fmt.Sprintf("%q: cannot tell which key it is the default of; name the key before it", st.Text)})
			continue
		}
		out = append(out, ctx.assign(pos, keys, st)...)
	}
	return out
}

// pairs checks a key's span followed by a number or a boolean:
// `key` value.
func (m *mdText) pairs() []Finding {
	var out []Finding
	ctx, s := m.ctx, m.s
	for i, km := range m.keyMentions {
		rest := s[km.end:]
		var sep string
		for _, p := range []string{" = ", " (", ", ", " "} {
			if strings.HasPrefix(rest, p) {
				sep = p
				break
			}
		}
		if sep == "" {
			continue
		}
		lit, _, ok := ParseLiteral(rest[len(sep):])
		if !ok || lit.Kind != Number && lit.Kind != Bool || m.inStatement(km.end+len(sep)) {
			continue
		}
		keys := []string{km.key}
		if i > 0 && s[m.keyMentions[i-1].end:km.start] == " and " {
			keys = append([]string{m.keyMentions[i-1].key}, keys...)
		}
		pos := m.t.Pos(km.start)
		text := s[km.start : km.end+len(sep)+len(lit.Text)]
		if ctx != nil && ctx.ignored(text) {
			continue
		}
		if ctx == nil {
			out = append(out, m.noContext(pos, fmt.Sprintf("%q states a default", text)))
			continue
		}
		for _, k := range keys {
			out = append(out, ctx.compare(pos, k, &lit, "", "")...)
		}
	}
	return out
}

// spanAssignments checks the assignments inside code spans:
// `degrade: {quality_min 0.1, …}` and `a = b = value`.
func (m *mdText) spanAssignments() []Finding {
	var out []Finding
	ctx, s := m.ctx, m.s
	for _, sp := range m.spans {
		code := s[sp[0]+1 : sp[1]-1]
		pos := m.t.Pos(sp[0])
		for _, a := range spanAssignments(code) {
			if ctx != nil && ctx.ignored(s[sp[0]:sp[1]]) {
				break
			}
			if ctx == nil {
				out = append(out, m.noContext(pos, fmt.Sprintf("%q states a default", code)))
				break
			}
			var found []string
			for _, k := range a.keys {
				if ctx.resolve(k) != nil {
					found = append(found, k)
				}
			}
			if len(found) == 0 {
				out = append(out, Finding{Pos: pos, Msg: fmt.Sprintf("%q states %s for %v, which names no field here: rewrite it, teach the checker the name or list it as no default", code, a.lit.Text, a.keys)})
				continue
			}
			for _, k := range found {
				lit := a.lit
				out = append(out, ctx.compare(pos, k, &lit, "", "")...)
			}
		}
	}
	return out
}

type assignment struct {
	keys []string
	lit  Literal
}

var (
	reNested = regexp.MustCompile(`^([\pL_][\pL\pN_.]*):\s*\{(.*)\}$`)
	reBraces = regexp.MustCompile(`^\{(.*)\}\s*=\s*\{(.*)\}$`)
	reIdent  = regexp.MustCompile(`[\pL_][\pL\pN_.^]*$`)
)

// spanAssignments reads the defaults a code span states: "k = v",
// "a = k = v", "a = 1, b = 2", "{a, b} = {x, y}", "name: {k v, …}". Spans
// whose right-hand side is no literal (equations) state none.
func spanAssignments(code string) []assignment {
	code = strings.TrimSpace(code)
	if m := reNested.FindStringSubmatch(code); m != nil {
		var out []assignment
		for _, item := range strings.Split(m[2], ",") {
			f := strings.Fields(item)
			if len(f) < 2 {
				continue
			}
			if lit, n, ok := ParseLiteral(strings.Join(f[1:], " ")); ok && n == len(strings.Join(f[1:], " ")) {
				out = append(out, assignment{[]string{m[1] + "." + f[0]}, lit})
			}
		}
		return out
	}
	if m := reBraces.FindStringSubmatch(code); m != nil {
		names, vals := strings.Split(m[1], ","), strings.Split(m[2], ",")
		if len(names) != len(vals) {
			return nil
		}
		var out []assignment
		for i := range names {
			v := strings.TrimSpace(vals[i])
			if lit, n, ok := ParseLiteral(v); ok && n == len(v) {
				out = append(out, assignment{[]string{strings.TrimSpace(names[i])}, lit})
			}
		}
		return out
	}
	if !strings.Contains(code, "=") {
		return nil
	}
	// Hide comparisons, then split a list of assignments.
	hidden := strings.NewReplacer(">=", "\x01\x01", "<=", "\x02\x02", "!=", "\x03\x03", "==", "\x04\x04").Replace(code)
	var items []string
	for _, it := range strings.Split(hidden, ", ") {
		if len(items) > 0 && !strings.Contains(it, "=") {
			items[len(items)-1] += ", " + it
			continue
		}
		items = append(items, it)
	}
	var out []assignment
	for _, it := range items {
		parts := strings.Split(it, "=")
		if len(parts) < 2 {
			continue
		}
		v := strings.TrimSpace(parts[len(parts)-1])
		lit, n, ok := ParseLiteral(v)
		if !ok || n != len(v) || lit.Kind == String || lit.Kind == Zero {
			continue
		}
		var keys []string
		for _, p := range parts[:len(parts)-1] {
			p = strings.TrimSpace(p)
			if k := reIdent.FindString(p); k != "" {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			out = append(out, assignment{keys, lit})
		}
	}
	return out
}
