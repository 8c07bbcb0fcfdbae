// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
)

func TestWebServerByHand(t *testing.T) {
	e := New(1)
	w, err := NewWebServer(e, WebServerConfig{Workers: 1, ListenQueue: 1, Timeout: 10 * time.Second, CPUs: 1, LinkRate: 10000})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		o  Outcome
		at time.Duration
	}
	res := map[int]result{}
	send := func(id int, demand, size float64) {
		w.Handle(&Request{ID: uint64(id), Demand: demand, Size: size, Sent: e.Now(),
			OnFinish: func(r *Request) { res[int(r.ID)] = result{r.Outcome, r.Finished} }})
	}
	// 1: 0.1 s CPU then 1000 B at 10000 B/s: done at 0.2 s.
	// 2: waits for the worker, runs 0.2–0.4 s.
	// 3: the listen queue (capacity 1) is full: rejected at once.
	send(1, 0.1, 1000)
	send(2, 0.1, 1000)
	send(3, 0.1, 1000)
	if w.Listen.Waiting() != 1 {
		t.Errorf("listen queue %d, want 1", w.Listen.Waiting())
	}
	e.Run(150 * time.Millisecond)
	// Request 1 is on the link: 500 of its 1000 bytes left.
	if got := w.Link.Backlog(); math.Abs(got-500) > 1e-6 {
		t.Errorf("outgoing queue at 0.15 s: %v bytes, want 500", got)
	}
	e.Run(time.Second)
	want := map[int]result{1: {Completed, 200 * time.Millisecond}, 2: {Completed, 400 * time.Millisecond}, 3: {Rejected, 0}}
	for id, r := range want {
		if res[id] != r {
			t.Errorf("request %d: %v at %v, want %v at %v", id, res[id].o, res[id].at, r.o, r.at)
		}
	}
	if b := w.CPU.Busy(); math.Abs(b-0.2) > 1e-9 {
		t.Errorf("CPU busy %v s, want 0.2", b)
	}
	// A resource rule that refuses frees the worker at once.
	w.Rules.Admitter = AdmitFunc(func(time.Time, *Request) bool { return false })
	send(4, 1, 0)
	send(5, 1, 0)
	if res[4].o != Rejected || res[5].o != Rejected || w.Listen.InSystem() != 0 {
		t.Errorf("rule rejections: %v, %v, %d in the listen queue", res[4], res[5], w.Listen.InSystem())
	}
	if _, err := NewWebServer(e, WebServerConfig{Workers: 1, CPUs: 1}); err == nil || !strings.Contains(err.Error(), "LinkRate") {
		t.Errorf("missing link rate: %v", err)
	}
}

// TestLinkShares: replies over a shared PS link, with a delay hook for one
// client. A lone 10 KB reply on a 100 KB/s link measures 100 KB/s; under
// load, a client whose replies are delayed measures less bandwidth, and
// the link stays work-conserving.
func TestLinkShares(t *testing.T) {
	e := New(9)
	link, err := NewLink(e, 100e3)
	if err != nil {
		t.Fatal(err)
	}
	send := &Visit{Engine: e, Station: link, Work: Size}
	delayed := 0
	gate := &Delay{Engine: e, Next: send, Fn: func(now time.Time, r *Request) (time.Duration, bool) {
		if r.Client == 3 {
			return 0, false // standby: refused
		}
		if r.Client == 0 {
			delayed++
			return 50 * time.Millisecond, true
		}
		return 0, true
	}}
	// The lone reply first.
	var lone *Request
	r := &Request{Client: 1, Size: 10e3, OnFinish: func(r *Request) { lone = r }}
	gate.Handle(r)
	e.Run(time.Second)
	if lone == nil || lone.ResponseTime() != 100*time.Millisecond {
		t.Fatalf("lone reply: %+v", lone)
	}
	// Four clients at 2 req/s of 10 KB (client 3 is refused).
	bytes := map[int]float64{}
	secs := map[int]float64{}
	n := map[int]float64{}
	refused := 0
	for c := 0; c < 4; c++ {
		src, err := NewOpen(e, OpenConfig{Arrivals: dist.Poisson{Rate: schedule(t, "2")},
			Types: []RequestType{{Size: det(t, 10e3)}}, Client: c, Target: gate,
			OnFinish: func(r *Request) {
				if r.Outcome != Completed {
					refused++
					return
				}
				bytes[r.Client] += r.Size
				secs[r.Client] += r.ResponseTime().Seconds()
				n[r.Client]++
			}})
		if err != nil {
			t.Fatal(err)
		}
		src.Start()
	}
	busy0 := link.Busy()
	e.Run(2001 * time.Second)
	bw := func(c int) float64 { return bytes[c] / secs[c] }
	t.Logf("measured bandwidth per client: %.0f %.0f %.0f B/s; link utilization %.3f", bw(0), bw(1), bw(2), (link.Busy()-busy0)/2000)
	if !(bw(0) < 0.9*bw(1)) || math.Abs(bw(1)-bw(2))/bw(1) > 0.05 {
		t.Errorf("bandwidths %v, %v, %v: want client 0 below 1 and 2, and 1 ≈ 2", bw(0), bw(1), bw(2))
	}
	// Poisson arrivals shifted by a constant are still Poisson, so the
	// delayed client's transfers see the same link: its mean response
	// time is the others' plus the 50 ms delay.
	if d := secs[0]/n[0] - secs[1]/n[1]; math.Abs(d-0.05) > 0.01 {
		t.Errorf("delayed client's extra mean response time %.4f s, want about 0.05", d)
	}
	if refused == 0 || bytes[3] != 0 || delayed == 0 {
		t.Errorf("refused %d, client 3 bytes %v, delayed %d", refused, bytes[3], delayed)
	}
	// Offered 3 × 2 × 10 KB/s = 60 KB/s of 100 KB/s.
	if u := (link.Busy() - busy0) / 2000; math.Abs(u-0.6) > 0.02 {
		t.Errorf("link utilization %.3f, want about 0.6", u)
	}
}
