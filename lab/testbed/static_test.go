// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"crypto/sha256"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestGenerateFileSetRules(t *testing.T) {
	cfg := DefaultStaticConfig()
	cfg.Files = 5000
	a, err := GenerateFileSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := GenerateFileSet(cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same config gave different file sets")
	}
	cfg2 := cfg
	cfg2.Seed = 2
	if c, _ := GenerateFileSet(cfg2); reflect.DeepEqual(a, c) {
		t.Fatal("different seeds gave the same file set")
	}

	var total, small, dyn float64
	var weights []float64
	var sizes []float64
	var overTail int
	paths := map[string]bool{}
	for _, e := range a {
		if paths[e.Path] {
			t.Fatalf("duplicate path %s", e.Path)
		}
		paths[e.Path] = true
		if e.Size < 1 || e.Size > cfg.MaxSize {
			t.Fatalf("%s: size %d outside [1, %d]", e.Path, e.Size, cfg.MaxSize)
		}
		large := e.Size > LargeFileSize
		switch {
		case e.Dynamic:
			if large || !strings.HasPrefix(e.Path, "/cgi-bin/") {
				t.Fatalf("dynamic entry %+v must be small and under /cgi-bin/", e)
			}
		case large != strings.HasPrefix(e.Path, "/islarge/"):
			t.Fatalf("entry %+v: large files (and only they) live under /islarge/", e)
		case !large && !strings.HasPrefix(e.Path, "/f/"):
			t.Fatalf("small static entry %+v not under /f/", e)
		}
		total += e.Weight
		if !large {
			small += e.Weight
		}
		if e.Dynamic {
			dyn += e.Weight
		}
		weights = append(weights, e.Weight)
		sizes = append(sizes, float64(e.Size))
		if e.Size > surgeTailMin {
			overTail++
		}
	}
	if math.Abs(total-1) > 1e-9 {
		t.Errorf("weights sum to %v, want 1", total)
	}
	if f := dyn / small; math.Abs(f-0.2) > 0.01 {
		t.Errorf("dynamic share of small-file requests = %.3f, want 0.20", f)
	}
	// Zipf: the k-th most popular weighs 1/k of the most popular.
	slices.Sort(weights)
	slices.Reverse(weights)
	for _, k := range []int{2, 10, 100} {
		if r := weights[0] / weights[k-1]; math.Abs(r-float64(k)) > 1e-6*float64(k) {
			t.Errorf("weight ratio rank 1 / rank %d = %v, want %d", k, r, k)
		}
	}
	// Sizes: every tail draw is above the median, so the median m solves
	// 0.93·Φ((ln m − μ)/σ) = 1/2 (≈ 13.1 KB); the share above 133 KB is 7%
	// (Pareto tail) plus the body's own tail (~3%).
	slices.Sort(sizes)
	med := sizes[len(sizes)/2]
	z := math.Sqrt2 * math.Erfinv(2*0.5/(1-surgeTailProb)-1)
	if want := math.Exp(surgeMu + surgeSigma*z); math.Abs(med-want)/want > 0.1 {
		t.Errorf("median size %.0f, want about %.0f", med, want)
	}
	bodyTail := 0.5 * math.Erfc((math.Log(surgeTailMin)-surgeMu)/surgeSigma/math.Sqrt2)
	wantTail := surgeTailProb + (1-surgeTailProb)*bodyTail
	if got := float64(overTail) / float64(len(a)); math.Abs(got-wantTail) > 0.02 {
		t.Errorf("share above %d bytes = %.3f, want %.3f", surgeTailMin, got, wantTail)
	}
}

func TestStaticConfigValidate(t *testing.T) {
	tests := []struct {
		mod   func(*StaticConfig)
		field string
	}{
		{func(c *StaticConfig) { c.Files = 0 }, "files=0"},
		{func(c *StaticConfig) { c.MaxSize = 1000 }, "max_size=1000"},
		{func(c *StaticConfig) { c.Zipf = 0 }, "zipf=0"},
		{func(c *StaticConfig) { c.DynamicFraction = 1 }, "dynamic_fraction=1"},
		{func(c *StaticConfig) { c.DynamicWork = -1 }, "dynamic_work=-1"},
	}
	for _, tt := range tests {
		c := DefaultStaticConfig()
		tt.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tt.field)
		}
	}
}

func hashDir(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "manifest.json" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = sha256.Sum256(b)
		return nil
	})
	return out
}

func TestStaticServe(t *testing.T) {
	cfg := DefaultStaticConfig()
	cfg.Files, cfg.MaxSize, cfg.Dir = 150, 512<<10, t.TempDir()
	s, err := NewStatic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s)
	defer srv.Close()

	var meta StaticMeta
	getJSON(t, srv.Client(), srv.URL+"/_meta", &meta)
	if meta.Kind != "static" || !reflect.DeepEqual(meta.Files, s.Entries()) {
		t.Fatalf("/_meta kind %q with %d files, want static with the entries", meta.Kind, len(meta.Files))
	}
	kinds := map[string]bool{}
	for _, e := range meta.Files {
		kind := strings.Split(e.Path, "/")[1]
		if kinds[kind] && kind != "islarge" {
			continue // one of each small kind is enough; every large file is checked
		}
		kinds[kind] = true
		for _, q := range []string{"", "0.2"} {
			req, _ := http.NewRequest("GET", srv.URL+e.Path, nil)
			if q != "" {
				req.Header.Set(QualityHeader, q)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || int64(len(body)) != e.Size ||
				resp.Header.Get("Content-Length") != strconv.FormatInt(e.Size, 10) {
				t.Fatalf("%s: status %d, %d bytes, Content-Length %q; want 200 and %d", e.Path, resp.StatusCode,
					len(body), resp.Header.Get("Content-Length"), e.Size)
			}
			u, err := strconv.ParseFloat(resp.Header.Get(UtilizationHeader), 64)
			if err != nil || u < 0 || u > 1 {
				t.Errorf("%s: utilization %q", e.Path, resp.Header.Get(UtilizationHeader))
			}
			if e.Dynamic {
				want := strconv.Itoa(scaledWork(cfg.DynamicWork, 1))
				if q != "" {
					want = strconv.Itoa(scaledWork(cfg.DynamicWork, 0.2))
				}
				if got := resp.Header.Get("X-Sluice-Work"); got != want {
					t.Errorf("%s q=%q: work %s, want %s", e.Path, q, got, want)
				}
			}
		}
	}
	if !kinds["f"] || !kinds["islarge"] || !kinds["cgi-bin"] {
		t.Fatalf("file set lacks a kind: %v", kinds)
	}
	for _, p := range []string{"/f/99999.html", "/manifest.json", "/"} {
		resp, err := srv.Client().Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}

	// Same seed in another directory: identical bytes. Same directory:
	// reused, not rewritten.
	cfg2 := cfg
	cfg2.Dir = t.TempDir()
	s2, err := NewStatic(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if h1, h2 := hashDir(t, cfg.Dir), hashDir(t, cfg2.Dir); !reflect.DeepEqual(h1, h2) || len(h1) == 0 {
		t.Fatalf("same seed, different contents (%d vs %d files)", len(h1), len(h2))
	}
	victim := filepath.Join(cfg.Dir, "f")
	entries, _ := os.ReadDir(victim)
	fi1, _ := os.Stat(filepath.Join(victim, entries[0].Name()))
	s3, err := NewStatic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s3.Close()
	fi2, _ := os.Stat(filepath.Join(victim, entries[0].Name()))
	if !fi1.ModTime().Equal(fi2.ModTime()) {
		t.Errorf("an existing matching file set was regenerated")
	}
}

func TestStaticTempDirRemoved(t *testing.T) {
	cfg := DefaultStaticConfig()
	cfg.Files, cfg.MaxSize = 20, 256<<10
	s, err := NewStatic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Dir()
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s still exists after Close", dir)
	}
}
