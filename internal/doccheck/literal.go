// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// LitKind is the kind of a literal value written in documentation.
type LitKind int

// Kinds of Literal.
const (
	// Number is a number with an optional unit: 500ms, 1 s, 1/16, −0.5,
	// 32 KiB, 90 %.
	Number LitKind = iota + 1
	// Bool is true or false.
	Bool
	// String is a quoted string ("sluice") or the text of a code span
	// (`X-Sluice-Quality`) that is no other literal.
	String
	// List is a bracketed list: ["default"], [default].
	List
	// Zero is a word that states the zero value: none, nil, any, all,
	// required.
	Zero
)

// Literal is one value as written in a doc comment or a Markdown file.
type Literal struct {
	Kind LitKind
	Num  float64 // Number: the value in its unit
	Unit string  // Number: "", "ns", "µs", "ms", "s", "m", "h", "%", "KiB", "MiB", "GiB"
	Str  string  // String: the unquoted text
	List []string
	Text string // as written
}

// zeroWords state a zero (or absent) default.
var zeroWords = []string{"none", "nil", "any", "all", "required"}

// units a number may carry, longest first where one is a prefix of another.
var units = []string{"KiB", "MiB", "GiB", "min", "ns", "µs", "μs", "us", "ms", "s", "m", "h", "%"}

var unitScale = map[string]float64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "%": 1}

var durationUnit = map[string]time.Duration{"ns": time.Nanosecond, "µs": time.Microsecond, "μs": time.Microsecond,
	"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "min": time.Minute, "m": time.Minute, "h": time.Hour}

// isWordRune reports whether r continues a word or a number: a literal must
// end where no such rune follows ("90th" is no number).
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) || r == '_' }

// boundary reports whether s[i:] starts at a word boundary.
func boundary(s string, i int) bool {
	if i >= len(s) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return !isWordRune(r)
}

// ParseLiteral reads one literal at the start of s and returns it with the
// number of bytes it took. ok is false when s does not start with one.
func ParseLiteral(s string) (lit Literal, n int, ok bool) {
	switch {
	case strings.HasPrefix(s, "`"):
		end := strings.IndexByte(s[1:], '`')
		if end < 0 {
			return Literal{}, 0, false
		}
		inner := strings.TrimSpace(s[1 : 1+end])
		n = end + 2
		if l, m, ok := ParseLiteral(inner); ok && m == len(inner) && l.Kind != Zero {
			l.Text = s[:n]
			return l, n, true
		}
		return Literal{Kind: String, Str: inner, Text: s[:n]}, n, true
	case strings.HasPrefix(s, `"`):
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return Literal{}, 0, false
		}
		n = end + 2
		return Literal{Kind: String, Str: s[1 : 1+end], Text: s[:n]}, n, true
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Literal{}, 0, false
		}
		var items []string
		for _, it := range strings.Split(s[1:end], ",") {
			it = strings.Trim(strings.TrimSpace(it), "\"`")
			if it != "" {
				items = append(items, it)
			}
		}
		return Literal{Kind: List, List: items, Text: s[:end+1]}, end + 1, true
	}
	for _, w := range []string{"true", "false"} {
		if strings.HasPrefix(s, w) && boundary(s, len(w)) {
			return Literal{Kind: Bool, Str: w, Text: w}, len(w), true
		}
	}
	for _, w := range zeroWords {
		if strings.HasPrefix(s, w) && boundary(s, len(w)) {
			return Literal{Kind: Zero, Str: w, Text: w}, len(w), true
		}
	}
	return parseNumber(s)
}

// parseNumber reads [sign] digits [.digits] [/digits] [[space] unit].
func parseNumber(s string) (Literal, int, bool) {
	i, neg := 0, false
	switch {
	case strings.HasPrefix(s, "−"):
		i, neg = len("−"), true
	case strings.HasPrefix(s, "-"):
		i, neg = 1, true
	case strings.HasPrefix(s, "+"):
		i = 1
	}
	num, m := digits(s[i:])
	if m == 0 {
		return Literal{}, 0, false
	}
	i += m
	val, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return Literal{}, 0, false
	}
	if i < len(s) && s[i] == '/' {
		if den, k := digits(s[i+1:]); k > 0 {
			d, err := strconv.ParseFloat(den, 64)
			if err != nil || d == 0 {
				return Literal{}, 0, false
			}
			val /= d
			i += 1 + k
		}
	}
	if neg {
		val = -val
	}
	lit := Literal{Kind: Number, Num: val}
	for _, sp := range []string{"", " "} {
		found := false
		for _, u := range units {
			j := i + len(sp)
			if strings.HasPrefix(s[i:], sp+u) && boundary(s, j+len(u)) {
				lit.Unit = u
				i = j + len(u)
				found = true
				break
			}
		}
		if found {
			break
		}
	}
	if !boundary(s, i) {
		return Literal{}, 0, false
	}
	lit.Text = s[:i]
	return lit, i, true
}

// digits reads digits with an optional fraction.
func digits(s string) (string, int) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return "", 0
	}
	if i+1 < len(s) && s[i] == '.' && s[i+1] >= '0' && s[i+1] <= '9' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return s[:i], i
}

// ParseList reads one or more literals at the start of s: "X", "X and Y",
// "X, Y and Z", "X or Y" and the same with code spans. It stops before the
// first item that is no literal, so "10, at most 1000" is one value.
func ParseList(s string) ([]Literal, int) {
	var out []Literal
	i := 0
	for {
		lit, n, ok := ParseLiteral(s[i:])
		if !ok {
			break
		}
		out = append(out, lit)
		i += n
		next := -1
		for _, sep := range []string{", and ", ", ", " and "} {
			if strings.HasPrefix(s[i:], sep) {
				if _, _, ok := ParseLiteral(s[i+len(sep):]); ok {
					next = i + len(sep)
				}
				break
			}
		}
		if next < 0 {
			break
		}
		i = next
	}
	return out, i
}

// Result of comparing a stated value with a real one.
type Result int

// Results of Compare.
const (
	// Equal: the stated value is the real one.
	Equal Result = iota + 1
	// Differ: the stated value is another value of the field's type.
	Differ
	// NotAValue: the stated text is no value of the field's type (a
	// phrase such as "a quarter of Period"); it needs a derived check.
	NotAValue
)

var durationType = reflect.TypeOf(time.Duration(0))

// Compare compares a literal with a real value. Pointers are followed; a
// nil pointer is the zero value of its type.
func Compare(lit Literal, v reflect.Value) Result {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Func, reflect.Map:
		if lit.Kind == Zero {
			// none, nil: no value at all.
			return eq(v.IsNil() || v.Kind() == reflect.Map && v.Len() == 0)
		}
	}
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return compareZero(lit, v)
		}
		v = v.Elem()
	}
	if lit.Kind == Zero {
		return compareZero(lit, v)
	}
	switch {
	case v.Type() == durationType:
		d, ok := litDuration(lit)
		if !ok {
			return NotAValue
		}
		return eq(d == time.Duration(v.Int()))
	case v.Kind() == reflect.Bool:
		if lit.Kind != Bool {
			return NotAValue
		}
		return eq((lit.Str == "true") == v.Bool())
	case v.CanInt() || v.CanUint() || v.CanFloat():
		x, ok := litNumber(lit)
		if !ok {
			return NotAValue
		}
		var real float64
		switch {
		case v.CanInt():
			real = float64(v.Int())
		case v.CanUint():
			real = float64(v.Uint())
		default:
			real = v.Float()
		}
		return eq(sameNumber(x, real, lit.Text))
	case v.Kind() == reflect.String:
		switch lit.Kind {
		case String:
			return eq(lit.Str == v.String())
		case Number, Bool:
			return eq(strings.Trim(lit.Text, "`\"") == v.String())
		}
		return NotAValue
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		if lit.Kind != List {
			return NotAValue
		}
		if len(lit.List) != v.Len() {
			return Differ
		}
		for i, s := range lit.List {
			if v.Index(i).String() != s {
				return Differ
			}
		}
		return Equal
	}
	return NotAValue
}

// compareZero compares a literal that should state the zero value.
func compareZero(lit Literal, v reflect.Value) Result {
	switch lit.Kind {
	case Zero:
	case Number:
		if lit.Num != 0 {
			return Differ
		}
	case Bool:
		if lit.Str != "false" {
			return Differ
		}
	default:
		return NotAValue
	}
	return eq(v.IsZero() || (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Len() == 0)
}

func eq(b bool) Result {
	if b {
		return Equal
	}
	return Differ
}

func litDuration(lit Literal) (time.Duration, bool) {
	switch lit.Kind {
	case Number:
		if lit.Unit == "" && lit.Num == 0 {
			return 0, true
		}
		u, ok := durationUnit[lit.Unit]
		if !ok {
			return 0, false
		}
		return time.Duration(math.Round(lit.Num * float64(u))), true
	case String:
		d, err := time.ParseDuration(lit.Str)
		return d, err == nil
	}
	return 0, false
}

func litNumber(lit Literal) (float64, bool) {
	if lit.Kind != Number {
		return 0, false
	}
	if lit.Unit == "" {
		return lit.Num, true
	}
	s, ok := unitScale[lit.Unit]
	return lit.Num * s, ok
}

// sameNumber reports whether the stated x is the real value: equal within
// float rounding, or, for a decimal written with three or more significant
// digits, the real value rounded to the digits written (2.81 for 2.8125).
func sameNumber(x, real float64, text string) bool {
	if x == real || math.Abs(x-real) <= 1e-9*math.Max(math.Abs(x), math.Abs(real)) {
		return true
	}
	dot := strings.IndexByte(text, '.')
	if dot < 0 || strings.ContainsAny(text, "/ ") {
		return false
	}
	dec := 0
	for _, r := range text[dot+1:] {
		if r < '0' || r > '9' {
			break
		}
		dec++
	}
	sig := strings.TrimLeft(strings.NewReplacer(".", "", "-", "", "−", "").Replace(text[:dot+1+dec]), "0")
	if len(sig) < 3 {
		return false
	}
	return math.Abs(x-real) <= 0.5*math.Pow(10, -float64(dec))*(1+1e-9)
}

// Format renders a real value for a message, following pointers.
func Format(v reflect.Value) string {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return "nil"
		}
		v = v.Elem()
	}
	if v.Type() == durationType {
		return time.Duration(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	}
	return fmt.Sprint(v.Interface())
}
