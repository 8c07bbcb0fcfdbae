// SPDX-License-Identifier: Apache-2.0

// Package sharetest runs the closed-loop clients of the live tests of
// per-client bandwidth shares (package share, and the proxy with
// shares:): each client asks for replies back to back on one connection,
// identified by a request header, and counts the bytes it receives.
package sharetest

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Clients is a set of running closed-loop clients, one per name.
type Clients struct {
	received []atomic.Int64
	idle     []atomic.Bool
	failures atomic.Int64
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// Start starts one client per name, each sending GET url with header set
// to its name, back to back, over one connection (15 s timeout). Stop
// ends them.
func Start(url, header string, names []string) *Clients {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Clients{received: make([]atomic.Int64, len(names)), idle: make([]atomic.Bool, len(names)), cancel: cancel}
	for i, n := range names {
		c.wg.Go(func() { c.run(ctx, i, url, header, n) })
	}
	return c
}

// run is client i's loop: a failed request or a status other than 200
// counts as a failure; while the client is idle it sends nothing.
func (c *Clients) run(ctx context.Context, i int, url, header, name string) {
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 15 * time.Second}
	for ctx.Err() == nil {
		if c.idle[i].Load() {
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set(header, name)
		resp, err := cl.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				c.failures.Add(1)
			}
			continue
		}
		nb, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			c.failures.Add(1)
			continue
		}
		c.received[i].Add(nb)
	}
}

// Idle makes client i stop sending requests.
func (c *Clients) Idle(i int) { c.idle[i].Store(true) }

// Window waits warm, then returns each client's received bytes per second
// over the next dur.
func (c *Clients) Window(warm, dur time.Duration) []float64 {
	time.Sleep(warm)
	b0 := make([]int64, len(c.received))
	for i := range b0 {
		b0[i] = c.received[i].Load()
	}
	time.Sleep(dur)
	x := make([]float64, len(c.received))
	for i := range x {
		x[i] = float64(c.received[i].Load()-b0[i]) / dur.Seconds()
	}
	return x
}

// Failures returns the number of requests that failed or were answered
// with a status other than 200.
func (c *Clients) Failures() int64 { return c.failures.Load() }

// Stop ends the clients and waits for them.
func (c *Clients) Stop() {
	c.cancel()
	c.wg.Wait()
}
