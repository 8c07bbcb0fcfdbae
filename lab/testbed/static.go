// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
)

// SURGE file-size model (Barford and Crovella, 1998): a log-normal body
// with parameters μ and σ of ln(bytes), and a Pareto tail starting at
// tailMin bytes with shape tailAlpha, drawn with probability tailProb.
const (
	surgeMu       = 9.357
	surgeSigma    = 1.318
	surgeTailMin  = 133000
	surgeTailA    = 1.1
	surgeTailProb = 0.07
)

// LargeFileSize is the size in bytes above which a file is "large" and
// lives under /islarge/ (50 KB, as in Voigt and Gunningberg).
const LargeFileSize = 50 * 1024

// FileEntry is one URL of the static file set.
type FileEntry struct {
	// Path is the URL path: /f/NNNNN.html (small), /islarge/NNNNN.html
	// (larger than LargeFileSize) or /cgi-bin/NNNNN (dynamic).
	Path string `json:"path"`
	// Size is the reply body size in bytes.
	Size int64 `json:"size"`
	// Weight is the Zipf popularity: the probability that a request asks
	// for this entry. Weights sum to 1.
	Weight float64 `json:"weight"`
	// Dynamic is true for /cgi-bin/ entries, generated per request.
	Dynamic bool `json:"dynamic"`
}

// StaticConfig configures a Static backend. Start from DefaultStaticConfig.
type StaticConfig struct {
	// Dir is the directory holding the generated files. Empty means a new
	// temporary directory, removed by Close. An existing Dir whose
	// manifest.json was written for the same Files, Seed, MaxSize, Zipf and
	// DynamicFraction is reused; otherwise the files are (re)generated there
	// (only the f/ and islarge/ subdirectories and manifest.json are written).
	Dir string `json:"dir"`
	// Files is the number of entries (≥ 1).
	Files int `json:"files"`
	// Seed determines sizes, popularity, the dynamic entries and contents.
	Seed uint64 `json:"seed"`
	// MaxSize bounds file sizes in bytes (the Pareto tail is bounded there;
	// ≥ 256 KiB).
	MaxSize int64 `json:"max_size"`
	// Zipf is the exponent s of the popularity law: the entry of rank k has
	// weight ∝ 1/k^s (s > 0; SURGE uses 1).
	Zipf float64 `json:"zipf"`
	// DynamicFraction is the share of requests for small files that are
	// dynamic, in [0, 1) (0.2 in the papers).
	DynamicFraction float64 `json:"dynamic_fraction"`
	// DynamicWork is the number of random numbers summed per dynamic request
	// at quality 1 (≥ 0), on top of generating its reply bytes.
	DynamicWork int `json:"dynamic_work"`
}

// DefaultStaticConfig returns 1000 entries, seed 1, 4 MiB maximum size,
// Zipf exponent 1, 20% dynamic and 20000 numbers of work per dynamic request,
// in a temporary directory.
func DefaultStaticConfig() StaticConfig {
	return StaticConfig{Files: 1000, Seed: 1, MaxSize: 4 << 20, Zipf: 1, DynamicFraction: 0.2, DynamicWork: 20000}
}

// Validate reports the first invalid field, naming it and its value.
func (c StaticConfig) Validate() error {
	switch {
	case c.Files < 1 || c.Files > 1_000_000:
		return fmt.Errorf("static: files=%d: want 1..1000000", c.Files)
	case c.MaxSize < 256<<10 || c.MaxSize > 1<<30:
		return fmt.Errorf("static: max_size=%d: want %d..%d bytes", c.MaxSize, 256<<10, 1<<30)
	case !(c.Zipf > 0) || math.IsInf(c.Zipf, 0):
		return fmt.Errorf("static: zipf=%v: want a positive exponent", c.Zipf)
	case !(c.DynamicFraction >= 0 && c.DynamicFraction < 1):
		return fmt.Errorf("static: dynamic_fraction=%v: want [0,1)", c.DynamicFraction)
	case c.DynamicWork < 0 || float64(c.DynamicWork) > maxWorkN:
		return fmt.Errorf("static: dynamic_work=%d: want 0..%d", c.DynamicWork, int64(maxWorkN))
	}
	return nil
}

// GenerateFileSet returns the entries of the file set for cfg, in index
// order, without touching the disk. It is deterministic in cfg.
//
// Sizes: with probability 0.07 a bounded Pareto on [133000, MaxSize] bytes
// with α = 1.1, otherwise a log-normal with μ = 9.357, σ = 1.318 (of ln
// bytes), capped at MaxSize and at least 1 byte. Popularity: ranks are a
// random permutation and weight(k) = k^−s / Σ_j j^−s. Dynamic entries:
// small entries taken in random order while the dynamic weight stays within
// DynamicFraction of the total small-entry weight.
func GenerateFileSet(cfg StaticConfig) ([]FileEntry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	body, err := dist.NewLogNormal(math.Exp(surgeMu+surgeSigma*surgeSigma/2), surgeSigma)
	if err != nil {
		return nil, err
	}
	tail, err := dist.NewBoundedPareto(surgeTailMin, float64(cfg.MaxSize), surgeTailA)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5355524745))
	n := cfg.Files
	entries := make([]FileEntry, n)
	for i := range entries {
		var s float64
		if rng.Float64() < surgeTailProb {
			s = tail.Sample(rng)
		} else {
			s = body.Sample(rng)
		}
		entries[i].Size = max(1, min(cfg.MaxSize, int64(math.Round(s))))
	}
	ranks := rng.Perm(n)
	var norm float64
	for k := 1; k <= n; k++ {
		norm += math.Pow(float64(k), -cfg.Zipf)
	}
	for i := range entries {
		entries[i].Weight = math.Pow(float64(ranks[i]+1), -cfg.Zipf) / norm
	}
	var smallWeight float64
	for _, e := range entries {
		if e.Size <= LargeFileSize {
			smallWeight += e.Weight
		}
	}
	target := cfg.DynamicFraction * smallWeight
	var dynWeight float64
	for _, i := range rng.Perm(n) {
		e := &entries[i]
		if e.Size <= LargeFileSize && dynWeight+e.Weight <= target {
			e.Dynamic = true
			dynWeight += e.Weight
		}
	}
	for i := range entries {
		e := &entries[i]
		name := fmt.Sprintf("%05d", i+1)
		switch {
		case e.Dynamic:
			e.Path = "/cgi-bin/" + name
		case e.Size > LargeFileSize:
			e.Path = "/islarge/" + name + ".html"
		default:
			e.Path = "/f/" + name + ".html"
		}
	}
	return entries, nil
}

// fillContent writes size bytes of deterministic text drawn from r to w:
// lower-case letters in lines of 80 bytes.
func fillContent(w io.Writer, r *rand.Rand, size int64) error {
	var buf [8192]byte
	pos := int64(0)
	for pos < size {
		n := min(int64(len(buf)), size-pos)
		for i := int64(0); i < n; i += 8 {
			v := r.Uint64()
			for j := int64(0); j < 8 && i+j < n; j++ {
				if (pos+i+j)%80 == 79 {
					buf[i+j] = '\n'
				} else {
					buf[i+j] = 'a' + byte(v%26)
				}
				v >>= 8
			}
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		pos += n
	}
	return nil
}

// contentRand returns the generator of entry index i's bytes.
func contentRand(seed uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0xF11E<<32|uint64(i)))
}

// staticManifest is the file written to Dir/manifest.json.
type staticManifest struct {
	Version         int         `json:"version"`
	Files           int         `json:"files"`
	Seed            uint64      `json:"seed"`
	MaxSize         int64       `json:"max_size"`
	Zipf            float64     `json:"zipf"`
	DynamicFraction float64     `json:"dynamic_fraction"`
	Entries         []FileEntry `json:"entries"`
}

const staticManifestVersion = 1

// Static serves a SURGE-like file set. Files are served with
// http.ServeContent (Content-Length, Range, HEAD and conditional requests
// work as with a file server). A dynamic entry costs DynamicWork ×
// EffectiveQuality random numbers of CPU work plus generating its reply of
// the listed size; static files ignore quality. X-Sluice-Utilization is the
// same in-flight estimate as CGI's. Static is safe for concurrent use.
type Static struct {
	cfg     StaticConfig
	dir     string
	temp    bool
	entries []FileEntry
	byPath  map[string]int
	modTime time.Time
	seq     atomic.Uint64
	meter   *loadMeter
	ctr     counters
	closed  atomic.Bool
}

var _ Backend = (*Static)(nil)

// NewStatic validates cfg, generates (or reuses) the file set on disk and
// returns a Static backend. Call Close to remove a temporary directory.
func NewStatic(cfg StaticConfig) (*Static, error) {
	entries, err := GenerateFileSet(cfg)
	if err != nil {
		return nil, err
	}
	s := &Static{cfg: cfg, dir: cfg.Dir, entries: entries, meter: newLoadMeter(runtime.GOMAXPROCS(0))}
	if s.dir == "" {
		s.dir, err = os.MkdirTemp("", "sluice-static-*")
		if err != nil {
			return nil, fmt.Errorf("static: temporary directory: %w", err)
		}
		s.temp = true
	}
	if err := s.materialize(); err != nil {
		if s.temp {
			os.RemoveAll(s.dir)
		}
		return nil, err
	}
	s.byPath = make(map[string]int, len(entries))
	for i, e := range entries {
		s.byPath[e.Path] = i
	}
	if fi, err := os.Stat(filepath.Join(s.dir, "manifest.json")); err == nil {
		s.modTime = fi.ModTime()
	}
	return s, nil
}

// Dir returns the directory holding the files.
func (s *Static) Dir() string { return s.dir }

// Entries returns a copy of the file set.
func (s *Static) Entries() []FileEntry { return append([]FileEntry(nil), s.entries...) }

// diskPath returns where a non-dynamic entry lives under dir.
func diskPath(dir string, e FileEntry) string {
	return filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(e.Path, "/")))
}

// materialize writes the files unless a matching manifest says they exist.
func (s *Static) materialize() error {
	m := staticManifest{
		Version: staticManifestVersion, Files: s.cfg.Files, Seed: s.cfg.Seed, MaxSize: s.cfg.MaxSize,
		Zipf: s.cfg.Zipf, DynamicFraction: s.cfg.DynamicFraction, Entries: s.entries,
	}
	want, err := json.Marshal(m)
	if err != nil {
		return err
	}
	mpath := filepath.Join(s.dir, "manifest.json")
	if have, err := os.ReadFile(mpath); err == nil && string(have) == string(want) && s.filesPresent() {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("static: dir %q: %w", s.dir, err)
	}
	os.Remove(mpath)
	for _, sub := range []string{"f", "islarge"} {
		p := filepath.Join(s.dir, sub)
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("static: clearing %q: %w", p, err)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("static: creating %q: %w", p, err)
		}
	}
	for i, e := range s.entries {
		if e.Dynamic {
			continue
		}
		if err := writeFile(diskPath(s.dir, e), contentRand(s.cfg.Seed, i), e.Size); err != nil {
			return err
		}
	}
	if err := os.WriteFile(mpath, want, 0o644); err != nil {
		return fmt.Errorf("static: writing %q: %w", mpath, err)
	}
	return nil
}

func (s *Static) filesPresent() bool {
	for _, e := range s.entries {
		if e.Dynamic {
			continue
		}
		fi, err := os.Stat(diskPath(s.dir, e))
		if err != nil || fi.Size() != e.Size {
			return false
		}
	}
	return true
}

func writeFile(path string, r *rand.Rand, size int64) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("static: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("static: %w", cerr)
		}
	}()
	bw := bufio.NewWriterSize(f, 64<<10)
	if err := fillContent(bw, r, size); err != nil {
		return fmt.Errorf("static: writing %q: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("static: writing %q: %w", path, err)
	}
	return nil
}

// StaticMeta is the /_meta manifest of a Static backend.
type StaticMeta struct {
	Kind            string      `json:"kind"`
	Files           []FileEntry `json:"files"`
	Seed            uint64      `json:"seed"`
	LargeFileSize   int64       `json:"large_file_size"`
	DynamicFraction float64     `json:"dynamic_fraction"`
	DynamicWork     int         `json:"dynamic_work"`
}

// Meta returns the manifest with every entry.
func (s *Static) Meta() any {
	return StaticMeta{Kind: "static", Files: s.entries, Seed: s.cfg.Seed, LargeFileSize: LargeFileSize,
		DynamicFraction: s.cfg.DynamicFraction, DynamicWork: s.cfg.DynamicWork}
}

// Stats returns the request counters.
func (s *Static) Stats() Stats { return s.ctr.stats() }

// Close removes the directory if it was temporary. It is idempotent.
func (s *Static) Close() error {
	if s.closed.Swap(true) || !s.temp {
		return nil
	}
	return os.RemoveAll(s.dir)
}

// ServeHTTP answers /_meta, /healthz and the entries of the file set.
func (s *Static) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if serveMeta(w, r, s.Meta) {
		return
	}
	s.meter.metered(&s.ctr, func() int {
		rec := &StatusRecorder{ResponseWriter: w}
		s.serve(rec, r)
		return rec.Code()
	})
}

func (s *Static) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set(UtilizationHeader, formatUtilization(s.meter.utilization(time.Now())))
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" not allowed", http.StatusMethodNotAllowed)
		return
	}
	quality, err := ParseQuality(r.Header)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	i, ok := s.byPath[r.URL.Path]
	if !ok {
		http.Error(w, "no such file "+r.URL.Path, http.StatusNotFound)
		return
	}
	e := s.entries[i]
	if e.Dynamic {
		s.serveDynamic(w, r, e, quality)
		return
	}
	if s.closed.Load() && s.temp {
		http.Error(w, "static backend closed", http.StatusServiceUnavailable)
		return
	}
	f, err := os.Open(diskPath(s.dir, e))
	if err != nil {
		http.Error(w, "opening "+e.Path+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	h.Set("Content-Type", "text/html; charset=utf-8")
	http.ServeContent(w, r, e.Path, s.modTime, f)
}

// serveDynamic does the work of a /cgi-bin/ entry and writes its reply.
func (s *Static) serveDynamic(w http.ResponseWriter, r *http.Request, e FileEntry, quality float64) {
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0xC61<<48|s.seq.Add(1)))
	n := 0
	if s.cfg.DynamicWork > 0 {
		n = scaledWork(s.cfg.DynamicWork, quality)
		SumRandom(rng, n)
	}
	h := w.Header()
	h.Set("X-Sluice-Work", strconv.Itoa(n))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.FormatInt(e.Size, 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// A write error means the client went away; there is nothing to do.
	_ = fillContent(w, rng, e.Size)
}
