// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// PathWork is the CPU work of the requests under one path prefix.
type PathWork struct {
	// Prefix is a URL path prefix starting with "/".
	Prefix string `json:"prefix"`
	// N is the number of random numbers generated and summed per request
	// at quality 1 (≥ 1).
	N int `json:"n"`
}

// ParseWork reads a work list written "PREFIX=N,PREFIX=N", for example
// "/cgi-bin/=200000,/=1000". Prefixes start with "/" and appear once; N is
// a positive integer (at most 1e10).
func ParseWork(s string) ([]PathWork, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("work %q: empty; want PREFIX=N[,PREFIX=N...]", s)
	}
	var out []PathWork
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		prefix, n, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("work item %d %q: want PREFIX=N", i+1, part)
		}
		prefix = strings.TrimSpace(prefix)
		n = strings.TrimSpace(n)
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v < 1 || v > maxWorkN {
			return nil, fmt.Errorf("work item %d %q: N=%q: want an integer in 1..%d", i+1, part, n, int64(maxWorkN))
		}
		out = append(out, PathWork{Prefix: prefix, N: int(v)})
	}
	if err := validateWork(out); err != nil {
		return nil, err
	}
	return out, nil
}

// maxWorkN bounds N so that one request cannot take hours.
const maxWorkN = 1e10

func validateWork(ws []PathWork) error {
	if len(ws) == 0 {
		return fmt.Errorf("work: empty list; want at least one PREFIX=N")
	}
	seen := make(map[string]bool, len(ws))
	for i, w := range ws {
		if !strings.HasPrefix(w.Prefix, "/") {
			return fmt.Errorf("work item %d: prefix %q must start with \"/\"", i+1, w.Prefix)
		}
		if seen[w.Prefix] {
			return fmt.Errorf("work item %d: prefix %q appears twice", i+1, w.Prefix)
		}
		seen[w.Prefix] = true
		if w.N < 1 || float64(w.N) > maxWorkN {
			return fmt.Errorf("work item %d: prefix %q: n=%d: want 1..%d", i+1, w.Prefix, w.N, int64(maxWorkN))
		}
	}
	return nil
}

// FormatWork writes ws in the syntax ParseWork reads.
func FormatWork(ws []PathWork) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.Prefix + "=" + strconv.Itoa(w.N)
	}
	return strings.Join(parts, ",")
}

// CGIConfig configures a CGI backend. Start from DefaultCGIConfig.
type CGIConfig struct {
	// Work maps path prefixes to work per request; the longest matching
	// prefix wins and a path with no match is answered 404.
	Work []PathWork `json:"work"`
	// Seed seeds the random numbers: request k (counted from 1 in arrival
	// order) draws from PCG(Seed, k).
	Seed uint64 `json:"seed"`
	// CPUNsPerNumber, when above 0, makes the work CPU time instead of a
	// count (Linux only): a request of n numbers sums random numbers until
	// its thread has run n × CPUNsPerNumber ns, so it costs the same CPU
	// time whatever slows the CPU (a busy neighbour core sharing the
	// physical one, the hypervisor). 0 (the default) sums exactly n.
	CPUNsPerNumber float64 `json:"cpu_ns_per_number,omitempty"`
}

// maxCPUNsPerNumber bounds CGIConfig.CPUNsPerNumber (1 µs per number).
const maxCPUNsPerNumber = 1000

// DefaultCGIConfig returns "/cgi-bin/=200000,/=1000" with seed 1.
func DefaultCGIConfig() CGIConfig {
	return CGIConfig{Work: []PathWork{{"/cgi-bin/", 200000}, {"/", 1000}}, Seed: 1}
}

// Validate reports the first invalid field, naming it and its value.
func (c CGIConfig) Validate() error {
	if err := validateWork(c.Work); err != nil {
		return fmt.Errorf("cgi: %w", err)
	}
	if ns := c.CPUNsPerNumber; !(ns >= 0 && ns <= maxCPUNsPerNumber) {
		return fmt.Errorf("cgi: cpu_ns_per_number %g: want 0 (count the numbers) or a CPU time per number in (0, %d] ns", ns, maxCPUNsPerNumber)
	}
	if c.CPUNsPerNumber > 0 && !CPUTimeSupported {
		return fmt.Errorf("cgi: cpu_ns_per_number %g: burning CPU time needs a thread CPU clock (Linux); %s has none", c.CPUNsPerNumber, runtime.GOOS)
	}
	return nil
}

// CGI is a backend doing real CPU work per request, like the CGI scripts of
// the papers: it generates n uniform random numbers in [0, 1) and replies
// with their sum, where n = round(N × EffectiveQuality(quality)) for the
// longest configured prefix of the path (and at least 1).
//
// With CGIConfig.CPUNsPerNumber above 0 the work is CPU time instead: the
// handler sums numbers until its thread has run n × CPUNsPerNumber ns
// (burnCPU), and n in the reply is how many it summed.
//
// The reply is text: "n=<n> sum=<sum>\n"; the header X-Sluice-Work holds n.
// X-Sluice-Utilization is the mean over UtilizationWindow of
// min(inflight, GOMAXPROCS)/GOMAXPROCS, an estimate of the CPU busy fraction
// the handler causes. CGI is safe for concurrent use.
type CGI struct {
	cfg   CGIConfig
	work  []PathWork // sorted by decreasing prefix length
	seq   atomic.Uint64
	meter *loadMeter
	ctr   counters
}

var _ Backend = (*CGI)(nil)

// NewCGI validates cfg and returns a CGI backend.
func NewCGI(cfg CGIConfig) (*CGI, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.CPUNsPerNumber > 0 {
		if _, err := threadCPU(); err != nil {
			return nil, fmt.Errorf("cgi: cpu_ns_per_number %g: reading the thread's CPU clock: %w", cfg.CPUNsPerNumber, err)
		}
	}
	work := slices.Clone(cfg.Work)
	slices.SortStableFunc(work, func(a, b PathWork) int { return len(b.Prefix) - len(a.Prefix) })
	return &CGI{cfg: cfg, work: work, meter: newLoadMeter(runtime.GOMAXPROCS(0))}, nil
}

// CGIMeta is the /_meta manifest of a CGI backend.
type CGIMeta struct {
	Kind       string     `json:"kind"`
	Work       []PathWork `json:"work"`
	Seed       uint64     `json:"seed"`
	MinQuality float64    `json:"min_quality"`
	// CPUNsPerNumber is CGIConfig's (0: the work is a count).
	CPUNsPerNumber float64 `json:"cpu_ns_per_number,omitempty"`
}

// Meta returns the manifest.
func (c *CGI) Meta() any {
	return CGIMeta{Kind: "cgi", Work: c.cfg.Work, Seed: c.cfg.Seed, MinQuality: MinQuality, CPUNsPerNumber: c.cfg.CPUNsPerNumber}
}

// Stats returns the request counters.
func (c *CGI) Stats() Stats { return c.ctr.stats() }

// Close does nothing; CGI holds no resources.
func (c *CGI) Close() error { return nil }

// WorkFor returns N for path (the longest matching prefix) and whether a
// prefix matched.
func (c *CGI) WorkFor(path string) (int, bool) {
	for _, w := range c.work {
		if strings.HasPrefix(path, w.Prefix) {
			return w.N, true
		}
	}
	return 0, false
}

// scaledWork returns round(n × EffectiveQuality(q)), at least 1.
func scaledWork(n int, q float64) int {
	return max(1, int(math.Round(float64(n)*EffectiveQuality(q))))
}

// SumRandom generates n uniform random numbers in [0, 1) from r and returns
// their sum: the unit of CPU work of the CGI kinds.
func SumRandom(r *rand.Rand, n int) float64 {
	var s float64
	for range n {
		s += r.Float64()
	}
	return s
}

// ServeHTTP answers /_meta and /healthz directly and does the configured
// work for every other path.
func (c *CGI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if serveMeta(w, r, c.Meta) {
		return
	}
	c.meter.metered(&c.ctr, func() int { return c.serve(w, r) })
}

func (c *CGI) serve(w http.ResponseWriter, r *http.Request) int {
	h := w.Header()
	quality, err := ParseQuality(r.Header)
	if err != nil {
		h.Set(UtilizationHeader, formatUtilization(c.meter.utilization(time.Now())))
		http.Error(w, err.Error(), http.StatusBadRequest)
		return http.StatusBadRequest
	}
	n, ok := c.WorkFor(r.URL.Path)
	if !ok {
		h.Set(UtilizationHeader, formatUtilization(c.meter.utilization(time.Now())))
		http.Error(w, "no work configured for path "+r.URL.Path, http.StatusNotFound)
		return http.StatusNotFound
	}
	n = scaledWork(n, quality)
	rng := rand.New(rand.NewPCG(c.cfg.Seed, c.seq.Add(1)))
	var sum float64
	if ns := c.cfg.CPUNsPerNumber; ns > 0 {
		n, sum = burnCPU(rng, time.Duration(float64(n)*ns))
	} else {
		sum = SumRandom(rng, n)
	}
	body := "n=" + strconv.Itoa(n) + " sum=" + strconv.FormatFloat(sum, 'f', 6, 64) + "\n"
	h.Set(UtilizationHeader, formatUtilization(c.meter.utilization(time.Now())))
	h.Set("X-Sluice-Work", strconv.Itoa(n))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(body))
	return http.StatusOK
}
