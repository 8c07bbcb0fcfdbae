// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseWeighted(t *testing.T) {
	cases := []struct {
		in      string
		want    []Weighted
		wantErr string
	}{
		{"gold:0.2,bronze:0.8", []Weighted{{"gold", 0.2}, {"bronze", 0.8}}, ""},
		{" a , b:3 ", []Weighted{{"a", 1}, {"b", 3}}, ""},
		{"/a?x=1:0.7,/b:0.3", []Weighted{{"/a?x=1", 0.7}, {"/b", 0.3}}, ""},
		{"http://127.0.0.1:8080/a:3,http://127.0.0.1/b", []Weighted{{"http://127.0.0.1:8080/a", 3}, {"http://127.0.0.1/b", 1}}, ""},
		{"http://127.0.0.1:8080", nil, "needs a path"},
		{"", nil, "empty list"},
		{"a,,b", nil, "entry 2"},
		{"a:0", nil, "must be positive"},
		{"a:-1", nil, "must be positive"},
		{"a:NaN", nil, "must be positive"},
		{"a:+Inf", nil, "must be positive"},
		{"a:x", nil, "not a number"},
		{":1", nil, "empty name"},
		{"a,a:2", nil, "appears twice"},
	}
	for _, tc := range cases {
		got, err := ParseWeighted("--classes", tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--classes") {
				t.Errorf("ParseWeighted(%q) error %v, want one naming --classes and containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseWeighted(%q): %v", tc.in, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("ParseWeighted(%q) = %v, want %v", tc.in, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("ParseWeighted(%q) = %v, want %v", tc.in, got, tc.want)
			}
		}
	}
}

func FuzzParseWeighted(f *testing.F) {
	for _, s := range []string{"gold:0.2,bronze:0.8", "a", "/x:1,/y", ":", "a:1e308,b:1e308", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ws, err := ParseWeighted("f", s)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, w := range ws {
			if w.Name == "" || !(w.Weight > 0) || math.IsInf(w.Weight, 0) || seen[w.Name] {
				t.Fatalf("ParseWeighted(%q) accepted %v", s, ws)
			}
			seen[w.Name] = true
		}
		p := newPicker(weightsOf(ws))
		for _, u := range []float64{0, 0.5, math.Nextafter(1, 0)} {
			if i := p.pick(u); i < 0 || i >= len(ws) {
				t.Fatalf("pick(%v) = %d of %d", u, i, len(ws))
			}
		}
	})
}

func TestPickerProportions(t *testing.T) {
	p := newPicker([]float64{1, 0.5, 2.5})
	counts := make([]int, 3)
	const n = 40000
	for i := range n {
		counts[p.pick((float64(i)+0.5)/n)]++
	}
	for i, want := range []float64{0.25, 0.125, 0.625} {
		if got := float64(counts[i]) / n; math.Abs(got-want) > 1e-3 {
			t.Errorf("index %d: share %v, want %v", i, got, want)
		}
	}
	// The low-discrepancy sequence used for users follows weights at every prefix.
	g := newPicker([]float64{0.2, 0.8})
	gold := 0
	for i := range 50 {
		if g.pick(lowDiscrepancy(i)) == 0 {
			gold++
		}
		if want := 0.2 * float64(i+1); math.Abs(float64(gold)-want) > 1.5 {
			t.Fatalf("after %d users: %d gold, want %.1f", i+1, gold, want)
		}
	}
}

func TestCheckLoopbackURL(t *testing.T) {
	cases := []struct {
		in string
		ok bool
	}{
		{"http://127.0.0.1:8080", true},
		{"http://127.1.2.3/x", true},
		{"https://localhost:8443/", true},
		{"http://[::1]:80/", true},
		{"http://10.0.0.1/", false},
		{"http://example.com/", false},
		{"http://0.0.0.0:80/", false},
		{"http://192.168.1.1/", false},
		{"ftp://127.0.0.1/", false},
		{"127.0.0.1:8080", false},
		{"http:///x", false},
		{"http://127.0.0.1.nip.io/", false},
	}
	for _, tc := range cases {
		_, err := CheckLoopbackURL("--target", tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("CheckLoopbackURL(%q) error %v, want ok=%v", tc.in, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--target") {
			t.Errorf("error %q does not name the flag", err)
		}
	}
}

func TestURLTemplates(t *testing.T) {
	tpl, err := parseTemplate("f", "/read?msg={rand:5-7}&u={rand:1-1}")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for range 200 {
		seen[tpl.generate(r)] = true
	}
	if len(seen) != 3 || !seen["/read?msg=5&u=1"] || !seen["/read?msg=7&u=1"] {
		t.Errorf("generated %v", seen)
	}
	for _, bad := range []string{"/x{rand:3-1}", "/x{rand:a-b}", "/x{rand:1-2", "/x{rand:5}"} {
		if _, err := parseTemplate("--paths", bad); err == nil || !strings.Contains(err.Error(), "--paths") {
			t.Errorf("parseTemplate(%q) error %v", bad, err)
		}
	}
}

func TestReadURLList(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "urls.txt")
	os.WriteFile(file, []byte("# comment\n/a 2\n\nhttp://127.0.0.1:9/b\n/c?x={rand:1-9}  0.5\n"), 0o644)
	got, err := ReadURLList("--urls", file)
	if err != nil {
		t.Fatal(err)
	}
	want := []Weighted{{"/a", 2}, {"http://127.0.0.1:9/b", 1}, {"/c?x={rand:1-9}", 0.5}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	if _, err := NewURLs("urls", "--urls", got); err != nil {
		t.Error(err)
	}
	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("/a\n/b x\n"), 0o644)
	if _, err := ReadURLList("--urls", bad); err == nil || !strings.Contains(err.Error(), "bad.txt:2") {
		t.Errorf("bad weight: error %v, want file:line", err)
	}
	os.WriteFile(bad, []byte("/a\nhttp://10.1.1.1/x\n"), 0o644)
	ws, _ := ReadURLList("--urls", bad)
	if _, err := NewURLs("urls", "--urls", ws); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("non-loopback URL: error %v", err)
	}
	list, err := ReadURLList("--urls", "/x,/y:3")
	if err != nil || len(list) != 2 || list[1].Weight != 3 {
		t.Errorf("inline list: %v %v", list, err)
	}
}

func TestMarkovFile(t *testing.T) {
	good := `
states:
  login: /login?user={rand:1-3}
  inbox: /inbox
  read:  /read
start: login
transitions:
  login: {inbox: 1}
  inbox: {read: 0.6, inbox: 0.3, login: 0.1}
  read:  {inbox: 1}
`
	m, err := ParseMarkov("m.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	s := m.NewSession(r)
	if first := s.Next(r); first.Type != "login" || !strings.HasPrefix(first.URL, "/login?user=") {
		t.Fatalf("first request %+v, want the start state", first)
	}
	// Stationary distribution of the chain: π(login)=0.1π(inbox),
	// π(read)=0.6π(inbox), π(inbox)=1/1.7.
	counts := map[string]float64{}
	const n = 200000
	prev := "login"
	for range n {
		q := s.Next(r)
		if prev == "login" && q.Type != "inbox" || prev == "read" && q.Type != "inbox" {
			t.Fatalf("transition %s -> %s is not in the file", prev, q.Type)
		}
		prev = q.Type
		counts[q.Type]++
	}
	for st, want := range map[string]float64{"inbox": 1 / 1.7, "read": 0.6 / 1.7, "login": 0.1 / 1.7} {
		if got := counts[st] / n; math.Abs(got-want) > 0.01 {
			t.Errorf("state %s: share %.4f, want %.4f", st, got, want)
		}
	}
	bad := []struct{ text, want string }{
		{"states: {a: /a}\nstart: b\ntransitions: {a: {a: 1}}\n", `m.yaml:2: start: "b" is not a state`},
		{"states: {a: /a}\nstart: a\ntransitions: {a: {b: 1}}\n", `m.yaml:3: transitions.a.b: "b" is not a state`},
		{"states: {a: /a, b: /b}\nstart: a\ntransitions: {a: {b: 1}}\n", "state \"b\" has no transitions row"},
		{"states: {a: /a}\nstart: a\ntransitions:\n  a: {a: -1}\n", "m.yaml:4: transitions.a.a: weight -1"},
		{"states: {a: http://8.8.8.8/}\nstart: a\ntransitions: {a: {a: 1}}\n", `m.yaml:1: states.a: "http://8.8.8.8/": host "8.8.8.8" is not a loopback address`},
		{"states: {a: /a}\nstart: a\nextra: 1\ntransitions: {a: {a: 1}}\n", `m.yaml:3: extra: unknown field "extra" (valid here: start, states, transitions)`},
		{"start: a\n", "m.yaml:1: states: no states"},
		{"states: {a: /a}\ntransitions: {a: {a: 1}}\n", "m.yaml:1: start: is missing"},
	}
	for _, b := range bad {
		_, err := ParseMarkov("m.yaml", []byte(b.text))
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("ParseMarkov(%q) error %v, want %q", b.text, err, b.want)
		}
	}
}

func TestSurgeWorkload(t *testing.T) {
	m := &Meta{Kind: "static", Files: []MetaFile{
		{Path: "/f/1.html", Weight: 0.5}, {Path: "/islarge/2.bin", Weight: 0.1},
		{Path: "/cgi-bin/3", Weight: 0.2, Dynamic: true}, {Path: "/f/4.html", Weight: 0.2}, {Path: "/f/never", Weight: 0},
	}}
	w, err := NewSurge(m)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	s := w.NewSession(r)
	counts := map[string]float64{}
	const n = 100000
	for range n {
		q := s.Next(r)
		counts[q.Type]++
		counts[q.URL]++
	}
	for k, want := range map[string]float64{"small": 0.7, "large": 0.1, "dynamic": 0.2, "/f/1.html": 0.5, "/f/never": 0} {
		if got := counts[k] / n; math.Abs(got-want) > 0.01 {
			t.Errorf("%s: share %.4f, want %.2f", k, got, want)
		}
	}
	if _, err := NewSurge(&Meta{Kind: "bookstore"}); err == nil || !strings.Contains(err.Error(), "static") {
		t.Errorf("wrong kind: %v", err)
	}
	if _, err := NewSurge(&Meta{Kind: "static"}); err == nil {
		t.Error("no files: want an error")
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := openConfig(t, nil, mustConstant(t, "10"), time.Second)
		c.Transport = nil
		c.SetDefaults()
		return c
	}
	closed := func() Config {
		c := closedConfig(t, nil, "3", "det:1s", time.Second)
		c.Transport = nil
		c.SetDefaults()
		return c
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("valid open config: %v", err)
	}
	if err := closed().Validate(); err != nil {
		t.Fatalf("valid closed config: %v", err)
	}
	cases := []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"remote target", func(c *Config) { c.Target = "http://10.0.0.1" }, "Target"},
		{"no duration", func(c *Config) { c.Duration = 0 }, "Duration"},
		{"negative timeout", func(c *Config) { c.Timeout = -1 }, "Timeout"},
		{"negative connect timeout", func(c *Config) { c.ConnectTimeout = -1 }, "ConnectTimeout"},
		{"no workload", func(c *Config) { c.Workload = nil }, "Workload"},
		{"no arrivals", func(c *Config) { c.Arrivals = nil }, "Arrivals"},
		{"inflight", func(c *Config) { c.MaxInflight = -5 }, "MaxInflight"},
		{"conns above inflight", func(c *Config) { c.MaxConns = c.MaxInflight + 1 }, "MaxConns"},
		{"think in open", func(c *Config) { c.Think = mustDist(t, "det:1s") }, "Think"},
		{"retry in open", func(c *Config) { c.RetryWait = time.Second }, "RetryWait"},
		{"users in open", func(c *Config) { c.Users = mustSchedule(t, "4") }, "Users"},
		{"mode", func(c *Config) { c.Mode = "half" }, "Mode"},
		{"class name", func(c *Config) { c.Classes = []Weighted{{"a b", 1}} }, "Classes[0]"},
		{"class weight", func(c *Config) { c.Classes = []Weighted{{"a", 0}} }, "Classes[0]"},
		{"client dup", func(c *Config) { c.Clients = []Weighted{{"a", 1}, {"a", 1}} }, "Clients[1]"},
		{"header", func(c *Config) { c.ClassHeader = "X Class" }, "ClassHeader"},
		{"source addr", func(c *Config) {
			c.SourceAddrs, _ = ParseAddrs("x", "127.0.0.2")
			c.SourceAddrs[0] = c.SourceAddrs[0].Prev().Prev().Prev()
		}, "SourceAddrs[0]"},
		{"addrs vs clients", func(c *Config) {
			c.SourceAddrs, _ = ParseAddrs("x", "127.0.0.2-127.0.0.3")
			c.Clients = []Weighted{{"a", 1}}
		}, "SourceAddrs"},
		{"addrs with transport", func(c *Config) {
			c.SourceAddrs, _ = ParseAddrs("x", "127.0.0.2")
			c.Transport = handlerTransport{}
		}, "SourceAddrs"},
	}
	for _, tc := range cases {
		c := base()
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one starting with %q", tc.name, err, tc.field)
		}
	}
	closedCases := []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"no users", func(c *Config) { c.Users = mustSchedule(t, "0") }, "Users"},
		{"no think", func(c *Config) { c.Think = nil }, "Think"},
		{"arrivals in closed", func(c *Config) { c.Arrivals = mustConstant(t, "1") }, "Arrivals"},
		{"inflight in closed", func(c *Config) { c.MaxInflight = 3 }, "MaxInflight"},
		{"conns in closed", func(c *Config) { c.MaxConns = 3 }, "MaxConns"},
		{"negative retry", func(c *Config) { c.RetryWait = -time.Second }, "RetryWait"},
	}
	for _, tc := range closedCases {
		c := closed()
		tc.mod(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one starting with %q", tc.name, err, tc.field)
		}
	}
}
