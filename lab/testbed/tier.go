// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/lab/loadgen"
	"github.com/sluicehq/sluice/lab/retry"
	"github.com/sluicehq/sluice/policy"
)

// LabDeadlineHeader carries the deadline of the user request an attempt
// serves, in Unix nanoseconds, from the chain experiment's clients
// through every tier to the backend: the lab's own instrumentation (no
// hop acts on it), so that the backend can tell work whose user had gone
// (Queue's records).
const LabDeadlineHeader = "X-Lab-Deadline"

// Tier modes.
const (
	// TierSluice is a service with sluice in it: the middleware with an
	// admission policy in front of its handler, and sluice's client side
	// (client.Transport) on its calls to the next hop.
	TierSluice = "sluice"
)

// TierModes lists the tier's modes: package retry's policies (a service
// without overload control, its calls retried by the policy) and sluice.
var TierModes = []string{string(retry.Naive), string(retry.Budget), string(retry.Throttle), TierSluice}

// TierConfig configures a Tier. Start from DefaultTierConfig.
type TierConfig struct {
	// Next is the base URL of the next hop (a loopback address).
	Next string `json:"next"`
	// Mode is naive, budget, grpc-throttle or sluice (TierModes).
	Mode string `json:"mode"`
	// Retry is the policy of the calls of the naive, budget and
	// grpc-throttle modes (its Kind is the mode's); its PerTry bounds
	// each attempt.
	Retry retry.Config `json:"retry"`
	// Policy is the sluice mode's admission policy (the middleware's).
	Policy policy.Config `json:"-"`
	// Client is the sluice mode's client side (client.DefaultConfig
	// unless set).
	Client client.Config `json:"-"`
	// Forward lists the request headers passed on to the next hop as they
	// came (default: X-Sluice-Class and LabDeadlineHeader). The sluice
	// mode's client side stamps the hop headers itself.
	Forward []string `json:"forward"`
	// Seed seeds the client side's and the policies' draws.
	Seed uint64 `json:"seed"`
}

// DefaultTierConfig returns a naive tier (3 attempts, no per-try
// timeout) forwarding X-Sluice-Class and X-Lab-Deadline, with sluice
// mode's defaults: one stage "tier" with controller auto, and the client
// side's defaults.
func DefaultTierConfig() TierConfig {
	cfg := TierConfig{Mode: string(retry.Naive), Forward: []string{"X-Sluice-Class", LabDeadlineHeader}, Seed: 1,
		Client: client.DefaultConfig()}
	cfg.Policy.Stages = []policy.StageConfig{{Name: "tier", Match: policy.MatchConfig{PathPrefix: "/"}, Controller: "auto"}}
	return cfg
}

// Tier is one service of a chain (the chain figures, graph and
// graph-crowd): for every request it calls the next hop once, through
// its mode's client, and relays the answer. The call carries the
// request's context, so it ends when the request's caller goes away (a
// Go service's idiom). Without an answer the tier answers 504 (the
// call's time ran out), 503 with Retry-After (sluice's client side
// throttled it) or 502 (a transport failure).
//
// In the naive, budget and grpc-throttle modes the tier has no overload
// control: its calls are retried by package retry's policy, each attempt
// bounded by Retry.PerTry, and no deadline travels. In sluice mode the
// tier serves behind sluice.Middleware with Policy (whose runner steps
// its stages until Close) and calls through client.Transport with the
// context the middleware gives (the request's deadline and priority),
// as docs/hops.md describes.
//
// Tier is safe for concurrent use.
type Tier struct {
	cfg     TierConfig
	next    string
	handler http.Handler
	rt      http.RoundTripper
	base    *http.Transport
	pol     *policy.Policy
	ctr     counters
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
}

var _ Backend = (*Tier)(nil)

// NewTier validates cfg and returns a running Tier; call Close when done.
func NewTier(cfg TierConfig) (*Tier, error) {
	if _, err := loadgen.CheckLoopbackURL("next", cfg.Next); err != nil {
		return nil, fmt.Errorf("tier: %w", err)
	}
	base := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	fwd := make([]string, len(cfg.Forward))
	for i, h := range cfg.Forward {
		fwd[i] = http.CanonicalHeaderKey(h)
	}
	cfg.Forward = fwd
	t := &Tier{cfg: cfg, next: strings.TrimSuffix(cfg.Next, "/"), base: base}
	switch cfg.Mode {
	case string(retry.Naive), string(retry.Budget), string(retry.Throttle):
		rc := cfg.Retry
		rc.Kind = retry.Kind(cfg.Mode)
		rt, err := retry.NewTransport(base, rc, cfg.Seed)
		if err != nil {
			return nil, fmt.Errorf("tier: %w", err)
		}
		t.rt, t.handler = rt, http.HandlerFunc(t.forward)
	case TierSluice:
		rt, err := client.New(base, cfg.Client, client.Options{Rand: rand.New(rand.NewPCG(cfg.Seed, 0x74696572))})
		if err != nil {
			return nil, fmt.Errorf("tier: client: %w", err)
		}
		pol, err := policy.New(cfg.Policy, policy.Options{Rand: rand.New(rand.NewPCG(cfg.Seed, 0x706f6c))})
		if err != nil {
			return nil, fmt.Errorf("tier: policy: %w", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.cancel = cancel
		t.wg.Go(func() { pol.Run(ctx) })
		t.rt, t.pol, t.handler = rt, pol, sluice.Middleware(pol)(http.HandlerFunc(t.forward))
	default:
		return nil, fmt.Errorf("tier: mode %q: want one of %s", cfg.Mode, strings.Join(TierModes, ", "))
	}
	return t, nil
}

// TierMeta is the /_meta manifest of a Tier.
type TierMeta struct {
	Kind   string       `json:"kind"`
	Mode   string       `json:"mode"`
	Next   string       `json:"next"`
	Retry  retry.Config `json:"retry"`
	Stages []string     `json:"stages,omitempty"`
}

// Meta returns the manifest.
func (t *Tier) Meta() any {
	m := TierMeta{Kind: "tier", Mode: t.cfg.Mode, Next: t.next}
	if rt, ok := t.rt.(*retry.Transport); ok {
		m.Retry = rt.Config()
	}
	if t.pol != nil {
		for _, st := range t.pol.Stages() {
			m.Stages = append(m.Stages, st.Name())
		}
	}
	return m
}

// Stats returns the request counters.
func (t *Tier) Stats() Stats { return t.ctr.stats() }

// Policy returns the sluice mode's policy (nil in the other modes).
func (t *Tier) Policy() *policy.Policy { return t.pol }

// ServeHTTP answers /_meta and /healthz itself and every other request
// through the next hop.
func (t *Tier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if serveMeta(w, r, t.Meta) {
		return
	}
	sw := &StatusRecorder{ResponseWriter: w}
	t.handler.ServeHTTP(sw, r)
	t.ctr.count(sw.Code())
}

// forward calls the next hop for r and relays the answer.
func (t *Tier) forward(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.next+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for _, h := range t.cfg.Forward {
		if v := r.Header[h]; len(v) > 0 {
			req.Header[h] = v
		}
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		switch {
		case errors.Is(err, sluice.ErrRejected):
			w.Header().Set("Retry-After", "1")
			http.Error(w, "tier: throttled", http.StatusServiceUnavailable)
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
			http.Error(w, "tier: the next hop did not answer in time", http.StatusGatewayTimeout)
		default:
			// Also a caller that went away: nobody reads this.
			http.Error(w, "tier: "+err.Error(), http.StatusBadGateway)
		}
		return
	}
	defer resp.Body.Close()
	h := w.Header()
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		h.Set("Retry-After", ra)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		h.Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// Close stops the policy's runner and closes idle connections. It is
// idempotent.
func (t *Tier) Close() error {
	t.once.Do(func() {
		if t.cancel != nil {
			t.cancel()
		}
		t.wg.Wait()
		t.base.CloseIdleConnections()
	})
	return nil
}
