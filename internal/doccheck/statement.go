// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// A Statement is a default stated in prose, in one of the forms
//
//	(default X)  (defaults X and Y)  (default: a phrase)
//	Default X.   Default: a phrase.            (at a sentence's start)
//	… default X  … default of X                (X a literal)
//	X (default)  X (the default)  X (default: why)
//	… X by default
//
// where X is a literal (see ParseLiteral). Lits holds the literals stated
// (several for "defaults X and Y"); Phrase is the text after the trigger
// when it states no literal ("a quarter of Period"). At is where the
// value starts; keys are looked for before KeyEnd.
type Statement struct {
	At     int
	End    int // where the value ends
	KeyEnd int
	Lits   []Literal
	Phrase string
	Text   string // the statement as written, for messages
	// Clause is the text from At to the end of its clause ("3 periods, at
	// least 2 periods"), to match a derived default's phrase; Rest is the
	// text from At to the end, to compare a string written bare
	// ("(default text/plain; charset=utf-8)").
	Clause, Rest string
}

var (
	reParen   = regexp.MustCompile(`\(defaults?:?\s+`)
	reStart   = regexp.MustCompile(`(?:^|[.!?|]\s+|\*\*\s*)Defaults?:?\s+`)
	reInline  = regexp.MustCompile(`\bdefaults?(?: of)?\s+`)
	reAfter   = regexp.MustCompile(`\s*\((?:the )?default(?:\)|:)`)
	reByDeflt = regexp.MustCompile(`\bby default\b`)
	reNamed   = regexp.MustCompile(`^[A-Z]\w* = `)
	reSwitch  = regexp.MustCompile(`\b[a-z]+_[a-z_]+$`)
)

// statementCache holds Statements' answers: a checker's test reads the
// same texts many times.
var statementCache sync.Map // stmtKey → []Statement

type stmtKey struct {
	text     string
	markdown bool
}

// Statements finds the defaults stated in text. With markdown, triggers
// inside code spans are ignored. The result must not be modified.
func Statements(text string, markdown bool) []Statement {
	k := stmtKey{text, markdown}
	if st, ok := statementCache.Load(k); ok {
		return st.([]Statement)
	}
	st := statements(text, markdown)
	statementCache.Store(k, st)
	return st
}

func statements(text string, markdown bool) []Statement {
	sc := &stmtScan{text: text, taken: map[int]bool{}}
	if markdown {
		sc.spans = CodeSpans(text)
	}
	// X (default) first: its "(default:" must not read as a phrase.
	sc.defaultAfter()
	for _, m := range reParen.FindAllStringIndex(text, -1) {
		sc.phrase(m, true)
	}
	for _, m := range reStart.FindAllStringIndex(text, -1) {
		// Start the trigger at "Default", after the sentence end.
		i := strings.Index(text[m[0]:m[1]], "Default")
		sc.phrase([]int{m[0] + i, m[1]}, true)
	}
	for _, m := range reInline.FindAllStringIndex(text, -1) {
		if sc.taken[m[1]] {
			continue
		}
		lits, _ := ParseList(text[m[1]:])
		if len(lits) == 0 || lits[0].Kind == Zero {
			continue
		}
		sc.phrase(m, false)
	}
	sc.byDefault()
	return sc.out
}

// stmtScan is one text being searched for statements of defaults.
type stmtScan struct {
	text  string
	spans [][2]int     // code spans, whose triggers are ignored
	taken map[int]bool // value offsets already stated
	out   []Statement
}

// inCode reports whether byte i lies in a code span.
func (sc *stmtScan) inCode(i int) bool {
	for _, s := range sc.spans {
		if i >= s[0] && i < s[1] {
			return true
		}
	}
	return false
}

// add records st unless its value was already stated.
func (sc *stmtScan) add(st Statement) {
	if sc.taken[st.At] {
		return
	}
	sc.taken[st.At] = true
	sc.out = append(sc.out, st)
}

// defaultAfter finds "X (default)", "X (the default)" and "X (default: why)".
func (sc *stmtScan) defaultAfter() {
	text := sc.text
	for _, m := range reAfter.FindAllStringIndex(text, -1) {
		if sc.inCode(m[0]) {
			continue
		}
		start, lit, ok := literalBefore(text, m[0])
		if !ok {
			// "With track_demand (the default)": a switch on by default.
			if id := reSwitch.FindString(text[:m[0]]); id != "" && strings.HasSuffix(text[:m[1]], "(the default)") {
				at := m[0] - len(id)
				sc.add(Statement{At: at, End: m[0], KeyEnd: m[0], Lits: []Literal{{Kind: Bool, Str: "true", Text: id + " (the default)"}},
					Text: text[at:m[1]]})
			}
			continue
		}
		if strings.HasSuffix(text[:m[1]], ":") {
			// "X (default: Y)" with Y a value states Y, not X:
			// "a CPU list such as "0-3,8" (default: all)".
			if lits, _ := ParseList(strings.TrimLeft(text[m[1]:], " ")); len(lits) > 0 {
				continue
			}
		}
		sc.add(Statement{At: start, End: start + len(lit.Text), KeyEnd: start, Lits: []Literal{lit}, Text: text[start:m[1]],
			Clause: lit.Text, Rest: text[start:]})
		// The paren's own value offset, so that "(default: why)" is not
		// read again as a phrase.
		if i := strings.Index(text[m[0]:m[1]], "("); i >= 0 {
			sc.taken[paren(text, m[0]+i)] = true
		}
	}
}

// phrase reads the value after a trigger ("(default ", "Default: ",
// "default of "): literals, or with allowPhrase a phrase.
func (sc *stmtScan) phrase(trigger []int, allowPhrase bool) {
	text := sc.text
	if sc.inCode(trigger[0]) {
		return
	}
	at := trigger[1]
	if m := reNamed.FindString(text[at:]); m != "" {
		at += len(m) // (default DefaultBurst = 5)
	}
	lits, n := ParseList(text[at:])
	if len(lits) > 0 && lits[0].Kind == String && strings.Contains(lits[0].Str, "=") {
		return // Defaults: `a = 1`, …: assignments, read as pairs
	}
	st := Statement{At: at, KeyEnd: trigger[0], Lits: lits, Clause: clause(text[at:]), Rest: text[at:]}
	if len(lits) == 0 {
		// A phrase states a default after a colon ("Default: none.",
		// "(default: the largest max_concurrency)"), as a noun
		// phrase ("(default a quarter of Period"), with a number
		// ("(default bucket 20") or as a bare value ("(default
		// X-Sluice-Quality)"); "Defaults of Config" and "(defaults
		// set" state none.
		colon := strings.HasSuffix(strings.TrimSpace(text[trigger[0]:trigger[1]]), ":")
		article := false
		for _, a := range []string{"a ", "an ", "the "} {
			article = article || strings.HasPrefix(text[at:], a)
		}
		if !allowPhrase || !colon && !article && !hasNumber(clause(text[at:])) && !valueToken(text[at:]) {
			return
		}
		st.Phrase = clause(text[at:])
		st.End = at + len(st.Phrase)
		st.Text = text[trigger[0]:at] + st.Phrase
	} else {
		st.End = at + n
		st.Text = text[trigger[0] : at+n]
	}
	sc.add(st)
}

// byDefault finds "… X by default".
func (sc *stmtScan) byDefault() {
	text := sc.text
	for _, m := range reByDeflt.FindAllStringIndex(text, -1) {
		if sc.inCode(m[0]) {
			continue
		}
		cs := clauseStart(text, m[0])
		start, end, lits := lastNumbers(text[cs:m[0]])
		if len(lits) == 0 {
			continue
		}
		sc.add(Statement{At: cs + start, End: cs + end, KeyEnd: cs + start, Lits: lits, Text: text[cs+start : m[1]],
			Clause: clause(text[cs+start:]), Rest: text[cs+start:]})
	}
}

// paren returns the offset after "(default[s][:] " at i.
func paren(text string, i int) int {
	if m := reParen.FindStringIndex(text[i:]); m != nil && m[0] == 0 {
		return i + m[1]
	}
	return -1
}

// literalBefore returns the literal that ends at end (spaces allowed).
func literalBefore(text string, end int) (int, Literal, bool) {
	j := end
	for j > 0 && text[j-1] == ' ' {
		j--
	}
	if j == 0 {
		return 0, Literal{}, false
	}
	start := j
	switch text[j-1] {
	case '"', '`':
		q := text[j-1]
		k := strings.LastIndexByte(text[:j-1], q)
		if k < 0 {
			return 0, Literal{}, false
		}
		start = k
	default:
		for start > 0 {
			r, size := utf8.DecodeLastRuneInString(text[:start])
			if unicode.IsSpace(r) || r == '(' || r == ',' {
				break
			}
			start -= size
		}
	}
	lit, n, ok := ParseLiteral(text[start:j])
	if !ok || n != j-start {
		return 0, Literal{}, false
	}
	return start, lit, true
}

// clause returns text up to the end of its clause: a closing parenthesis
// at depth 0, ". ", ";" or the end.
func clause(text string) string {
	depth := 0
	for i, r := range text {
		switch {
		case r == '(':
			depth++
		case r == ')':
			if depth == 0 {
				return strings.TrimSpace(text[:i])
			}
			depth--
		case r == ';' && depth == 0:
			return strings.TrimSpace(text[:i])
		case r == '.' && depth == 0 && (i+1 == len(text) || text[i+1] == ' '):
			return strings.TrimSpace(text[:i])
		}
	}
	return strings.TrimSpace(text)
}

// clauseStart returns where the clause holding i starts: after the last
// "(", ";", ":", "—", "|" or sentence end before i.
func clauseStart(text string, i int) int {
	best := 0
	for _, sep := range []string{"(", ";", ":", "—", "|", ". "} {
		if k := strings.LastIndex(text[:i], sep); k >= 0 && k+len(sep) > best {
			best = k + len(sep)
		}
	}
	return best
}

// lastNumbers returns the last run of number or bool literals in text,
// with where it starts and ends.
func lastNumbers(text string) (int, int, []Literal) {
	at, end, last := -1, -1, []Literal(nil)
	for i := 0; i < len(text); {
		if i == 0 || !isWordRune(lastRune(text[:i])) && text[i-1] != '`' {
			if lits, n := ParseList(text[i:]); len(lits) > 0 && numeric(lits) {
				at, end, last = i, i+n, lits
				i += n
				continue
			}
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	return at, end, last
}

func numeric(lits []Literal) bool {
	for _, l := range lits {
		if l.Kind != Number && l.Kind != Bool {
			return false
		}
	}
	return true
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

// CodeSpans returns the [start, end) offsets of the Markdown code spans of
// text (single backticks).
func CodeSpans(text string) [][2]int {
	var out [][2]int
	for i := 0; i < len(text); i++ {
		if text[i] != '`' {
			continue
		}
		j := strings.IndexByte(text[i+1:], '`')
		if j < 0 {
			break
		}
		out = append(out, [2]int{i, i + j + 2})
		i += j + 1
	}
	return out
}

// SentenceStart returns where the sentence holding i starts: after the
// last ". " (not "e.g. ", "i.e. ") before i, or 0.
func SentenceStart(text string, i int) int {
	for k := i - 1; k > 0; k-- {
		if text[k] != ' ' || text[k-1] != '.' {
			continue
		}
		before := text[:k-1]
		abbrev := false
		for _, a := range []string{"e.g", "i.e", "etc", "cf", "vs", "Fig", "resp"} {
			if strings.HasSuffix(before, a) {
				abbrev = true
			}
		}
		if !abbrev {
			return k + 1
		}
	}
	return 0
}

// hasNumber reports whether s holds a number literal ("bucket 20").
func hasNumber(s string) bool {
	for i := 0; i < len(s); i++ {
		if i > 0 && isWordRune(lastRune(s[:i])) {
			continue
		}
		if lit, _, ok := ParseLiteral(s[i:]); ok && lit.Kind == Number && !reference(s[:i]) {
			return true
		}
	}
	return false
}

// valueToken reports whether s starts with a bare value rather than a
// word: a token with an upper-case letter, a digit or punctuation inside
// ("X-Sluice-Quality", "text/plain;").
func valueToken(s string) bool {
	tok := s
	if i := strings.IndexAny(s, " )"); i >= 0 {
		tok = s[:i]
	}
	tok = strings.TrimRight(tok, ".,;:")
	if tok == "" {
		return false
	}
	for _, r := range tok {
		if !unicode.IsLower(r) {
			return true
		}
	}
	return false
}
