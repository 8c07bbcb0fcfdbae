// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
)

// Meta is a testbed's self-description served at GET /_meta (see the
// testbed contract). Only the fields the load generator uses are decoded;
// others are ignored.
type Meta struct {
	// Kind is "static", "bookstore", "queue" or "cgi".
	Kind string `json:"kind"`
	// Files is the static file set (kind static).
	Files []MetaFile `json:"files"`
	// Items and Customers are the bookstore's id ranges 1..N (kind bookstore).
	Items     int `json:"items"`
	Customers int `json:"customers"`
	// Subjects are the bookstore's subjects (kind bookstore).
	Subjects []string `json:"subjects"`
}

// MetaFile is one file of the static testbed.
type MetaFile struct {
	Path    string  `json:"path"`
	Size    int64   `json:"size"`
	Weight  float64 `json:"weight"`
	Dynamic bool    `json:"dynamic"`
}

// metaTimeout bounds the /_meta request.
const metaTimeout = 10 * time.Second

// FetchMeta reads target's /_meta with rt (nil means a fresh transport that
// ignores proxy settings). target must be a loopback URL.
func FetchMeta(ctx context.Context, rt http.RoundTripper, target string) (*Meta, error) {
	u, err := CheckLoopbackURL("target", target)
	if err != nil {
		return nil, err
	}
	if rt == nil {
		t := &http.Transport{DisableCompression: true}
		defer t.CloseIdleConnections()
		rt = t
	}
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	metaURL := u.Scheme + "://" + u.Host + "/_meta"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metaURL, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", metaURL, err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", metaURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading body: %v", metaURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d (is the target a sluice-lab testbed?)", metaURL, resp.StatusCode)
	}
	var m Meta
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("GET %s: bad JSON: %v", metaURL, err)
	}
	return &m, nil
}

// Surge is the SURGE-like workload of the static testbed: independent
// requests, each for a file drawn with its Zipf popularity weight from
// /_meta. Request types are "large" (files under /islarge/), "dynamic"
// (CGI replies under /cgi-bin/) and "small" (the rest).
type Surge struct {
	paths []string
	types []string
	pick  picker
}

// NewSurge builds the workload from a static testbed's manifest.
func NewSurge(m *Meta) (*Surge, error) {
	if m.Kind != "static" {
		return nil, fmt.Errorf("workload surge: target /_meta kind is %q, want \"static\" (run `sluice-lab testbed static`)", m.Kind)
	}
	w := &Surge{}
	var ws []float64
	for i, f := range m.Files {
		if !strings.HasPrefix(f.Path, "/") {
			return nil, fmt.Errorf("workload surge: /_meta files[%d]: path %q does not start with \"/\"", i, f.Path)
		}
		if math.IsNaN(f.Weight) || f.Weight < 0 || math.IsInf(f.Weight, 0) {
			return nil, fmt.Errorf("workload surge: /_meta files[%d] (%s): weight %v must be finite and >= 0", i, f.Path, f.Weight)
		}
		if f.Weight == 0 {
			continue
		}
		typ := "small"
		switch {
		case strings.HasPrefix(f.Path, "/islarge/"):
			typ = "large"
		case f.Dynamic || strings.HasPrefix(f.Path, "/cgi-bin/"):
			typ = "dynamic"
		}
		w.paths = append(w.paths, f.Path)
		w.types = append(w.types, typ)
		ws = append(ws, f.Weight)
	}
	if len(ws) == 0 {
		return nil, fmt.Errorf("workload surge: /_meta lists no file with a positive weight")
	}
	w.pick = newPicker(ws)
	return w, nil
}

// Name implements Workload.
func (w *Surge) Name() string { return "surge" }

// NeedsBody implements Workload.
func (w *Surge) NeedsBody() bool { return false }

// NewSession implements Workload.
func (w *Surge) NewSession(*rand.Rand) Session { return surgeSession{w} }

type surgeSession struct{ w *Surge }

func (s surgeSession) Next(r *rand.Rand) Request {
	i := s.w.pick.pick(r.Float64())
	return Request{Type: s.w.types[i], URL: s.w.paths[i]}
}

func (surgeSession) Observe(Request, int, []byte) {}
