// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseLiteral(t *testing.T) {
	for _, tc := range []struct {
		in   string
		kind LitKind
		num  float64
		unit string
		n    int
	}{
		{"500ms", Number, 500, "ms", 5},
		{"1 s manager", Number, 1, "s", 3},
		{"1/16)", Number, 0.0625, "", 4},
		{"−0.5,", Number, -0.5, "", len("−0.5")},
		{"32 KiB;", Number, 32, "KiB", 6},
		{"90 %", Number, 90, "%", 4},
		{"1000/s", Number, 1000, "", 4},
		{"100µs", Number, 100, "µs", len("100µs")},
		{"true;", Bool, 0, "", 4},
		{`"sluice")`, String, 0, "", 8},
		{"`1024`, `1s`", Number, 1024, "", 6},
		{"`X-Api-Key`", String, 0, "", 11},
		{"[default]", List, 0, "", 9},
		{"none.", Zero, 0, "", 4},
	} {
		lit, n, ok := ParseLiteral(tc.in)
		if !ok || lit.Kind != tc.kind || n != tc.n || lit.Kind == Number && (lit.Num != tc.num || lit.Unit != tc.unit) {
			t.Errorf("ParseLiteral(%q) = %+v, %d, %v", tc.in, lit, n, ok)
		}
	}
	for _, in := range []string{"90th", "10⁶", "bucket 20", "nonexistent", "3periods"} {
		if lit, _, ok := ParseLiteral(in); ok {
			t.Errorf("ParseLiteral(%q) = %+v, want none", in, lit)
		}
	}
}

func TestParseList(t *testing.T) {
	for in, want := range map[string]int{
		"1 and 10000)":       2,
		"10, at most 1000":   1,
		"`1024`, `1s`":       2,
		"10, 20 and 30 s":    3,
		"1s, in [100ms, 1m]": 1,
	} {
		if lits, _ := ParseList(in); len(lits) != want {
			t.Errorf("ParseList(%q) = %d values %+v, want %d", in, len(lits), lits, want)
		}
	}
}

func lit(t *testing.T, s string) Literal {
	t.Helper()
	l, n, ok := ParseLiteral(s)
	if !ok || n != len(s) {
		t.Fatalf("ParseLiteral(%q) = %+v, %d, %v", s, l, n, ok)
	}
	return l
}

func TestCompare(t *testing.T) {
	one := 1024
	for _, tc := range []struct {
		stated string
		real   any
		want   Result
	}{
		{"500ms", 500 * time.Millisecond, Equal},
		{"1 s", time.Second, Equal},
		{"2.8s", 2800 * time.Millisecond, Equal},
		{"0", time.Duration(0), Equal},
		{"1s", 2 * time.Second, Differ},
		{"5", 5 * time.Second, NotAValue},
		{"1/16", 0.0625, Equal},
		{"0.0625", 1.0 / 16, Equal},
		{"2.81", 2.8125, Equal}, // rounded to the digits written
		{"1.25", 1.5, Differ},   // two digits: no rounding allowed
		{"1.5", 1.45, Differ},   // idem
		{"32 KiB", 32 << 10, Equal},
		{"90 %", 90.0, Equal},
		{"1ms", 1.0, NotAValue},
		{"100", int64(100), Equal},
		{"true", true, Equal},
		{"false", true, Differ},
		{`"sluice"`, "sluice", Equal},
		{"`none`", "none", Equal},
		{"none", "", Equal},
		{"none", "x", Differ},
		{"none", (*int)(nil), Equal},
		{"1024", &one, Equal},
		{"[default]", []string{"default"}, Equal},
		{"[a, b]", []string{"a"}, Differ},
		{"nil", map[string]int(nil), Equal},
	} {
		if got := Compare(lit(t, tc.stated), reflect.ValueOf(tc.real)); got != tc.want {
			t.Errorf("Compare(%q, %#v) = %v, want %v", tc.stated, tc.real, got, tc.want)
		}
	}
}

func TestStatements(t *testing.T) {
	for _, tc := range []struct {
		text, want string // want: the values found, "|"-separated per statement
	}{
		{"Period is how often it runs (default 500ms).", "500ms"},
		{"MinLimit and MaxLimit bound the limit (defaults 1 and 10000).", "1,10000"},
		{"Default: none.", "none"},
		{"Default true (it matters only for seda).", "true"},
		{`Discipline is "fifo" (default), "codel" or "codel-lifo".`, `"fifo"`},
		{`Source is "none" (default: the controllers hold their setting).`, `"none"`},
		{`CPUs restricts "host" to a CPU list such as "0-3,8" (default: all).`, "all"},
		{"each class at 5000 req/s by default: raise it", "5000"},
		{"StandbyLimit's default of 10 favours clients", "10"},
		{"Burst is the bucket size (default DefaultBurst = 5).", "5"},
		{"With track_demand (the default), d_c is", "track_demand (the default)"},
		{"Timeout bounds it (default a quarter of Period, in (0, Period)).", "~a quarter of Period, in (0, Period)"},
		{"Header (default X-Sluice-Quality).", "~X-Sluice-Quality"},
		{"MinCompletions (default 100), unless it ran for MaxWindow (default 1s).", "100|1s"},
		// Not statements.
		{"Defaults of Config.", ""},
		{"NewRunner validates cfg (defaults set) and", ""},
		{"the default class; its default applies", ""},
		{"Default is the class of requests no rule matches", ""},
	} {
		var got []string
		for _, st := range Statements(tc.text, false) {
			if st.Phrase != "" {
				got = append(got, "~"+st.Phrase)
				continue
			}
			var vals []string
			for _, l := range st.Lits {
				vals = append(vals, l.Text)
			}
			got = append(got, strings.Join(vals, ","))
		}
		if g := strings.Join(got, "|"); g != tc.want {
			t.Errorf("Statements(%q) = %q, want %q", tc.text, g, tc.want)
		}
	}
	// In Markdown, code spans are values and triggers inside them do not
	// count.
	sts := Statements("the implicit stage `default`, which has none. Default `30s`.", true)
	if len(sts) != 1 || sts[0].Lits[0].Text != "`30s`" {
		t.Errorf("markdown statements = %+v", sts)
	}
}

func TestSpanAssignments(t *testing.T) {
	for code, want := range map[string]string{
		"nreq = 100":                          "nreq=100",
		"a = high_probe = 1.5":                "a,high_probe=1.5",
		"α = 0.7, err_i = -0.5, err_d = 0.0":  "α=0.7 err_i=-0.5 err_d=0.0",
		"{K, Ti} = {20, 2.8 s}":               "K=20 Ti=2.8 s",
		"lc^c >= lc_thresh = 20":              "lc_thresh=20",
		"degrade: {enabled, quality_min 0.1}": "degrade.quality_min=0.1",
		"policer.burst = 20":                  "policer.burst=20",
		"g = clamp(x, 0.5, 1)":                "",
		"T = E[X] / (1 - pa*λ*E[X])":          "",
		"B = 100 KB/s":                        "",
	} {
		var got []string
		for _, a := range spanAssignments(code) {
			got = append(got, strings.Join(a.keys, ",")+"="+a.lit.Text)
		}
		if g := strings.Join(got, " "); g != want {
			t.Errorf("spanAssignments(%q) = %q, want %q", code, g, want)
		}
	}
}

type testConfig struct {
	Period   time.Duration `yaml:"period"`
	MinRate  float64       `yaml:"min_rate"`
	MaxRate  float64       `yaml:"max_rate"`
	Header   string        `yaml:"header"`
	Timeout  time.Duration `yaml:"timeout"`
	Parallel bool          `yaml:"parallel"`
}

const testSource = `package p

import "time"

type testConfig struct {
	// Period is the control period (default 1s).
	Period time.Duration ` + "`yaml:\"period\"`" + `
	// MinRate, MaxRate bound the rate (defaults 10 and 100000).
	MinRate float64 ` + "`yaml:\"min_rate\"`" + `
	MaxRate float64 ` + "`yaml:\"max_rate\"`" + `
	// Header names the header (default X-Sluice-Quality).
	Header string ` + "`yaml:\"header\"`" + `
	// Timeout bounds a call (default a quarter of Period).
	Timeout time.Duration ` + "`yaml:\"timeout\"`" + `
	// Parallel runs calls at once (default false).
	Parallel bool ` + "`yaml:\"parallel\"`" + `
}

// DefaultTestConfig returns Period 1s, MinRate 10 and MaxRate 100000.
func DefaultTestConfig() testConfig { return testConfig{} }

// Other prose: a timeout of 250ms (Header, with a 3 in it).
func other() {}
`

func loadTest(t *testing.T) *Package {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(testSource), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPackage(dir, "p")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckStruct(t *testing.T) {
	p := loadTest(t)
	s := p.Structs()["testConfig"]
	if s == nil || len(s.Groups) != 5 || len(s.Groups[1].Fields) != 2 {
		t.Fatalf("struct = %+v", s)
	}
	good := testConfig{Period: time.Second, MinRate: 10, MaxRate: 100000, Header: "X-Sluice-Quality", Timeout: 250 * time.Millisecond}
	quarter := Derived{Phrase: "a quarter of Period", Check: func() error { return nil }}
	c := &Context{Root: reflect.ValueOf(good), Derived: map[string]Derived{"Timeout": quarter}}
	if fs := c.CheckStruct(s); len(fs) != 0 {
		t.Errorf("findings %v", fs)
	}
	if got := c.Checked(); strings.Join(got, " ") != "Header MaxRate MinRate Parallel Period" {
		t.Errorf("checked %v", got)
	}
	// Each changed default is caught, and only that one.
	for _, mut := range []func(*testConfig){
		func(c *testConfig) { c.Period = 2 * time.Second },
		func(c *testConfig) { c.MaxRate = 1e6 },
		func(c *testConfig) { c.Header = "X-Quality" },
		func(c *testConfig) { c.Parallel = true },
	} {
		bad := good
		mut(&bad)
		c := &Context{Root: reflect.ValueOf(bad), Derived: map[string]Derived{"Timeout": quarter}}
		if fs := c.CheckStruct(s); len(fs) != 1 || fs[0].Real == "" {
			t.Errorf("%+v: findings %v", bad, fs)
		}
	}
	// A phrase without a derived check fails.
	c = &Context{Root: reflect.ValueOf(good)}
	if fs := c.CheckStruct(s); len(fs) != 1 || !strings.Contains(fs[0].Msg, "a quarter of Period") {
		t.Errorf("findings %v", fs)
	}
}

func TestCheckProse(t *testing.T) {
	p := loadTest(t)
	good := testConfig{Period: time.Second, MinRate: 10, MaxRate: 100000}
	for _, cm := range p.Comments() {
		c := &Context{Root: reflect.ValueOf(good)}
		switch cm.Of {
		case "DefaultTestConfig":
			if fs := c.CheckProse(cm.Doc, true); len(fs) != 0 {
				t.Errorf("findings %v", fs)
			}
			c.Mutate = "MinRate"
			if fs := c.CheckProse(cm.Doc, true); len(fs) != 1 || fs[0].Key != "MinRate" {
				t.Errorf("mutated: findings %v", fs)
			}
		case "other":
			// No default is stated: nothing to check, even strictly
			// nothing but the unmapped numbers.
			if fs := c.CheckProse(cm.Doc, false); len(fs) != 0 {
				t.Errorf("findings %v", fs)
			}
			if fs := c.CheckProse(cm.Doc, true); len(fs) != 2 {
				t.Errorf("strict: findings %v", fs)
			}
		}
	}
}

const testDoc = "# t\n\n## svc\n\n" +
	"| field | default | meaning |\n|---|---|---|\n" +
	"| `period` | `1s` | The period. |\n" +
	"| `min_rate`, `max_rate` | `10`, `100000` | Bounds. |\n" +
	"| `header` | none | With `parallel` false (the default) calls wait. |\n\n" +
	"The controller steps every `period` (1 s) and `timeout = 250ms`.\n\n" +
	"```\nperiod: 5s\n```\n\n" +
	"## other\n\nNothing (default 3) here.\n"

func TestCheckMarkdown(t *testing.T) {
	blocks := ParseMarkdown("t.md", testDoc)
	if len(blocks) != 3 || blocks[0].Table == nil || len(blocks[0].Table.Rows) != 3 || blocks[1].Section() != "svc" {
		t.Fatalf("blocks %+v", blocks)
	}
	good := testConfig{Period: time.Second, MinRate: 10, MaxRate: 100000, Timeout: 250 * time.Millisecond}
	run := func(c *Context) []Finding {
		return CheckMarkdown(blocks, func(b *Block) *Rule {
			if b.Section() == "svc" {
				return &Rule{Context: c}
			}
			return nil
		})
	}
	c := &Context{Root: reflect.ValueOf(good)}
	fs := run(c)
	if len(fs) != 1 || !strings.Contains(fs[0].Msg, `section "other"`) || fs[0].Pos != "t.md:19" {
		t.Errorf("findings %v", fs)
	}
	if got := strings.Join(c.Checked(), " "); got != "header max_rate min_rate parallel period timeout" {
		t.Errorf("checked %v", got)
	}
	for _, k := range c.Checked() {
		c.Mutate = k
		n := 0
		for _, f := range run(c) {
			if f.Key == k && f.Real != "" {
				n++
			}
		}
		if n == 0 {
			t.Errorf("a change of %s is not caught", k)
		}
	}
}

func TestFind(t *testing.T) {
	type inner struct {
		Max int `yaml:"max"`
	}
	type outer struct {
		Queue   inner   `yaml:"queue"`
		Servers []inner `yaml:"servers"`
		Inline  inner   `yaml:",inline"`
	}
	v := reflect.ValueOf(outer{Queue: inner{1}, Servers: []inner{{2}}, Inline: inner{3}})
	for key, want := range map[string][]int{
		"queue.max": {1}, "servers[].max": {2}, "servers.max": {2}, "Queue.Max": {1}, "max": {3}, "nothing": nil,
	} {
		var got []int
		for _, x := range Find(v, key) {
			got = append(got, int(x.Int()))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Find(%q) = %v, want %v", key, got, want)
		}
	}
}
