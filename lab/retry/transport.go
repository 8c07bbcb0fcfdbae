// SPDX-License-Identifier: Apache-2.0

package retry

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/ctxsleep"
	"github.com/sluicehq/sluice/internal/httpx"
)

// Transport is an http.RoundTripper that sends each request under a
// retry policy: every attempt bounded by PerTry, retried as the policy's
// Call decides, with one Dest per destination (host:port). It drives the
// same Dest and Call as the simulator, with the wall clock. Only requests
// without a body, or whose GetBody can send it again, are retried.
//
// A Transport is safe for concurrent use.
type Transport struct {
	base http.RoundTripper
	cfg  Config

	mu    sync.Mutex
	dests map[string]*destState
	seed  *rand.Rand

	attempts, retries atomic.Uint64
}

type destState struct {
	mu  sync.Mutex
	d   *Dest
	rng *rand.Rand
}

// NewTransport returns a Transport sending through base (nil:
// http.DefaultTransport) under cfg, whose random draws (Budget's none
// matter, but the interface takes a source) are seeded from seed.
func NewTransport(base http.RoundTripper, cfg Config, seed uint64) (*Transport, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Transport{base: base, cfg: cfg, dests: map[string]*destState{},
		seed: rand.New(rand.NewPCG(seed, 0x7265747279))}, nil
}

// Config returns the policy with its defaults.
func (t *Transport) Config() Config { return t.cfg }

// Counts returns the attempts sent and, of them, the retries.
func (t *Transport) Counts() (attempts, retries uint64) {
	return t.attempts.Load(), t.retries.Load()
}

func (t *Transport) dest(host string) (*destState, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ds, ok := t.dests[host]; ok {
		return ds, nil
	}
	d, err := NewDest(t.cfg)
	if err != nil {
		return nil, err
	}
	ds := &destState{d: d, rng: rand.New(rand.NewPCG(t.seed.Uint64(), t.seed.Uint64()))}
	t.dests[host] = ds
	return ds, nil
}

// Dest returns the state of destination host, or nil before the first
// call to it. Read it only while no call is running (tests).
func (t *Transport) Dest(host string) *Dest {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ds, ok := t.dests[host]; ok {
		return ds.d
	}
	return nil
}

// RoundTrip sends req and its retries.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ds, err := t.dest(req.URL.Host)
	if err != nil {
		httpx.CloseRequestBody(req)
		return nil, err
	}
	ctx := req.Context()
	canRetry := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	var call Call
	ds.mu.Lock()
	call.Begin(ds.d, time.Now(), ds.rng)
	ds.mu.Unlock()
	for first := true; ; first = false {
		out, cancel, err := t.attempt(req, first)
		if err != nil {
			httpx.CloseRequestBody(req)
			return nil, err
		}
		t.attempts.Add(1)
		if !first {
			t.retries.Add(1)
		}
		resp, err := t.base.RoundTrip(out)
		if err != nil && ctx.Err() != nil {
			ds.mu.Lock()
			call.Abandon(time.Now())
			ds.mu.Unlock()
			cancel()
			return nil, err
		}
		res := client.Result{}
		if err == nil {
			res.Status = resp.StatusCode
		}
		ds.mu.Lock()
		stop, wait := call.Done(time.Now(), res, ds.rng)
		ds.mu.Unlock()
		if stop != client.StopRetry || !canRetry || !ctxsleep.Sleep(ctx, wait) {
			if resp != nil {
				resp.Body = httpx.CancelOnClose(resp.Body, cancel)
			} else {
				cancel()
			}
			return resp, err
		}
		if resp != nil {
			_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
			_ = resp.Body.Close()
		}
		cancel()
	}
}

// attempt returns one attempt's request, bounded by PerTry, and the
// cancel of its context.
func (t *Transport) attempt(req *http.Request, first bool) (*http.Request, context.CancelFunc, error) {
	ctx, cancel := req.Context(), context.CancelFunc(func() {})
	if t.cfg.PerTry > 0 {
		ctx, cancel = context.WithTimeout(ctx, t.cfg.PerTry)
	}
	out := req.WithContext(ctx)
	if !first && req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			cancel()
			return nil, nil, err
		}
		out.Body = body
	}
	return out, cancel, nil
}
