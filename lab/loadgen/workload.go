// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
)

// Request is one HTTP GET chosen by a workload.
type Request struct {
	// Type labels the request in per-type results: a TPC-W interaction, a
	// Markov state, a SURGE file class or a URL path.
	Type string
	// URL is a path with optional query, relative to the target
	// ("/home?C_ID=3"), or an absolute loopback URL.
	URL string
}

// Workload chooses requests. One Session is created per closed-loop user
// and per open-loop worker; a session is used by one goroutine at a time.
// Implementations must be safe for concurrent calls of NewSession.
type Workload interface {
	// Name is the workload's name in results ("urls", "surge",
	// "tpcw/browsing", ...).
	Name() string
	// NewSession starts the state of one user. r is the user's own source of
	// randomness; the session may keep it only for use in its own methods.
	NewSession(r *rand.Rand) Session
	// NeedsBody reports whether sessions read response bodies in Observe;
	// when false, Observe receives a nil body and bodies are only counted.
	NeedsBody() bool
}

// Session is the navigation state of one user. It is not safe for
// concurrent use.
type Session interface {
	// Next returns the next request to send.
	Next(r *rand.Rand) Request
	// Observe reports the outcome of the request Next returned: the HTTP
	// status (0 when no response arrived) and, if the workload NeedsBody,
	// the first bytes of the body (at most 1 MiB).
	Observe(req Request, status int, body []byte)
}

// urlTemplate is a URL with {rand:A-B} placeholders, each replaced by a
// uniform random integer in [A, B] when the URL is generated.
type urlTemplate struct {
	parts []string // literal text around placeholders; len = len(ranges)+1
	lo    []int
	hi    []int
}

// parseTemplate compiles s. field names the source in errors.
func parseTemplate(field, s string) (urlTemplate, error) {
	var t urlTemplate
	rest := s
	for {
		i := strings.Index(rest, "{rand:")
		if i < 0 {
			t.parts = append(t.parts, rest)
			return t, nil
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return t, fmt.Errorf("%s: %q: unterminated {rand:A-B} placeholder", field, s)
		}
		spec := rest[i+len("{rand:") : i+j]
		a, b, ok := strings.Cut(spec, "-")
		lo, err1 := strconv.Atoi(strings.TrimSpace(a))
		hi, err2 := strconv.Atoi(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil || hi < lo {
			return t, fmt.Errorf("%s: %q: placeholder {rand:%s} must be {rand:A-B} with integers A <= B", field, s, spec)
		}
		t.parts = append(t.parts, rest[:i])
		t.lo = append(t.lo, lo)
		t.hi = append(t.hi, hi)
		rest = rest[i+j+1:]
	}
}

func (t urlTemplate) generate(r *rand.Rand) string {
	if len(t.lo) == 0 {
		return t.parts[0]
	}
	var b strings.Builder
	for i, p := range t.parts {
		b.WriteString(p)
		if i < len(t.lo) {
			b.WriteString(strconv.Itoa(t.lo[i] + r.IntN(t.hi[i]-t.lo[i]+1)))
		}
	}
	return b.String()
}

// checkWorkloadURL accepts a path starting with "/" or an absolute loopback
// URL.
func checkWorkloadURL(field, s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return fmt.Errorf("%s: %q contains a space or control character (escape it as %%XX)", field, s)
		}
	}
	if strings.HasPrefix(s, "/") {
		return nil
	}
	if strings.Contains(s, "://") {
		_, err := CheckLoopbackURL(field, s)
		return err
	}
	return fmt.Errorf("%s: %q must be a path starting with \"/\" or an absolute http://127.x.x.x URL", field, s)
}

// typeOfURL labels a URL by its path without query.
func typeOfURL(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
		if j := strings.IndexByte(s, '/'); j >= 0 {
			s = s[j:]
		} else {
			s = "/"
		}
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	return s
}

// URLs is a workload of independent requests: each request picks one URL
// with probability proportional to its weight, regardless of history.
type URLs struct {
	name  string
	urls  []urlTemplate
	types []string
	pick  picker
}

// NewURLs builds an independent weighted choice over entries, each a path
// (relative to the target) or an absolute loopback URL, optionally with
// {rand:A-B} placeholders. name is the workload's name in results; field
// names the flag in errors.
func NewURLs(name, field string, entries []Weighted) (*URLs, error) {
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: no URLs", field)
	}
	w := &URLs{name: name}
	for _, e := range entries {
		if err := checkWorkloadURL(field, e.Name); err != nil {
			return nil, err
		}
		t, err := parseTemplate(field, e.Name)
		if err != nil {
			return nil, err
		}
		w.urls = append(w.urls, t)
		w.types = append(w.types, typeOfURL(e.Name))
	}
	w.pick = newPicker(weightsOf(entries))
	return w, nil
}

// ReadURLList reads a URL list: the file named by arg if arg names an
// existing regular file, otherwise arg itself as a comma-separated
// URL:weight list (see ParseWeighted). In a file,
// each non-empty line not starting with "#" is "URL [weight]".
func ReadURLList(field, arg string) ([]Weighted, error) {
	if st, err := os.Stat(arg); err != nil || !st.Mode().IsRegular() {
		return ParseWeighted(field, arg)
	}
	data, err := os.ReadFile(arg)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	var out []Weighted
	seen := map[string]int{}
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) > 2 {
			return nil, fmt.Errorf("%s: %s:%d: want \"URL [weight]\", got %q", field, arg, n+1, line)
		}
		w := 1.0
		if len(f) == 2 {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil || !(v > 0) || v > 1e300 {
				return nil, fmt.Errorf("%s: %s:%d: weight %q must be a positive number", field, arg, n+1, f[1])
			}
			w = v
		}
		if prev, ok := seen[f[0]]; ok {
			return nil, fmt.Errorf("%s: %s:%d: URL %q already listed on line %d", field, arg, n+1, f[0], prev)
		}
		seen[f[0]] = n + 1
		out = append(out, Weighted{Name: f[0], Weight: w})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %s: no URLs in file", field, arg)
	}
	return out, nil
}

// Name implements Workload.
func (w *URLs) Name() string { return w.name }

// NeedsBody implements Workload; independent choice ignores bodies.
func (w *URLs) NeedsBody() bool { return false }

// NewSession implements Workload.
func (w *URLs) NewSession(*rand.Rand) Session { return urlSession{w} }

type urlSession struct{ w *URLs }

func (s urlSession) Next(r *rand.Rand) Request {
	i := s.w.pick.pick(r.Float64())
	return Request{Type: s.w.types[i], URL: s.w.urls[i].generate(r)}
}

func (urlSession) Observe(Request, int, []byte) {}
