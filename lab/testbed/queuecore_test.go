// SPDX-License-Identifier: Apache-2.0

package testbed

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/internal/testclock"
)

var t0, ms = testclock.T0, testclock.Ms

// coreEvent is one step of a scripted queueCore timeline: at At, either a
// job arrives with Demand (Arrive true) or the core is advanced.
type coreEvent struct {
	at     time.Duration
	arrive bool
	id     uint64
	demand time.Duration
}

func TestQueueCoreCompletionTimes(t *testing.T) {
	tests := []struct {
		name    string
		servers int
		ps      bool
		events  []coreEvent
		until   time.Duration
		want    map[uint64]time.Duration // completion times
	}{
		{
			name: "fifo one server serves in order", servers: 1,
			events: []coreEvent{{0, true, 1, ms(10)}, {0, true, 2, ms(10)}, {ms(5), true, 3, ms(4)}},
			until:  ms(100),
			want:   map[uint64]time.Duration{1: ms(10), 2: ms(20), 3: ms(24)},
		},
		{
			name: "fifo two servers", servers: 2,
			events: []coreEvent{{0, true, 1, ms(10)}, {0, true, 2, ms(30)}, {0, true, 3, ms(10)}, {0, true, 4, ms(10)}},
			until:  ms(100),
			want:   map[uint64]time.Duration{1: ms(10), 3: ms(20), 4: ms(30), 2: ms(30)},
		},
		{
			name: "fifo late observer loses no capacity", servers: 1,
			// Nothing observes the core between 0 and 95 ms: the schedule is
			// still exact.
			events: []coreEvent{{0, true, 1, ms(10)}, {0, true, 2, ms(10)}, {0, true, 3, ms(10)}},
			until:  ms(95),
			want:   map[uint64]time.Duration{1: ms(10), 2: ms(20), 3: ms(30)},
		},
		{
			name: "ps one cpu two equal jobs finish together", servers: 1, ps: true,
			events: []coreEvent{{0, true, 1, ms(10)}, {0, true, 2, ms(10)}},
			until:  ms(100),
			want:   map[uint64]time.Duration{1: ms(20), 2: ms(20)},
		},
		{
			name: "ps one cpu short job leaves first", servers: 1, ps: true,
			// Both at rate 1/2 until 20 ms (job 1 done: 10 ms of work), then
			// job 2 alone with 20 ms left at rate 1: done at 40 ms.
			events: []coreEvent{{0, true, 1, ms(10)}, {0, true, 2, ms(30)}},
			until:  ms(100),
			want:   map[uint64]time.Duration{1: ms(20), 2: ms(40)},
		},
		{
			name: "ps late arrival", servers: 1, ps: true,
			// Job 1 alone for 5 ms (5 left), then both at 1/2: job 1 done at
			// 15 ms; job 2 has 10−5 = 5 left, alone: done at 20 ms.
			events: []coreEvent{{0, true, 1, ms(10)}, {ms(5), true, 2, ms(10)}},
			until:  ms(100),
			want:   map[uint64]time.Duration{1: ms(15), 2: ms(20)},
		},
		{
			name: "ps fewer jobs than cpus run at full speed", servers: 4, ps: true,
			events: []coreEvent{{0, true, 1, ms(10)}, {0, true, 2, ms(20)}},
			until:  ms(100),
			want:   map[uint64]time.Duration{1: ms(10), 2: ms(20)},
		},
		{
			name: "ps two cpus three jobs", servers: 2, ps: true,
			// Rate 2/3 each: 9 ms of work takes 13.5 ms; all three finish together.
			events: []coreEvent{{0, true, 1, ms(9)}, {0, true, 2, ms(9)}, {0, true, 3, ms(9)}},
			until:  ms(100),
			want:   map[uint64]time.Duration{1: ms(13.5), 2: ms(13.5), 3: ms(13.5)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newQueueCore(tt.servers, tt.ps, 0, time.Second)
			got := map[uint64]time.Duration{}
			record := func(done []completion) {
				for _, d := range done {
					if _, dup := got[d.id]; dup {
						t.Fatalf("job %d completed twice", d.id)
					}
					got[d.id] = d.at.Sub(t0)
				}
			}
			for _, e := range tt.events {
				done, ok := c.arrive(t0.Add(e.at), e.id, e.demand.Seconds(), nil)
				if !ok {
					t.Fatalf("job %d refused without a limit", e.id)
				}
				record(done)
			}
			record(c.advance(t0.Add(tt.until), nil))
			if len(got) != len(tt.want) {
				t.Fatalf("completions %v, want %v", got, tt.want)
			}
			for id, w := range tt.want {
				if d := got[id] - w; d < -time.Microsecond || d > time.Microsecond {
					t.Errorf("job %d completed at %v, want %v", id, got[id], w)
				}
			}
			if _, ok := c.nextEvent(); ok {
				t.Errorf("nextEvent reports work left after all jobs completed")
			}
		})
	}
}

func TestQueueCoreNextEvent(t *testing.T) {
	c := newQueueCore(1, true, 0, time.Second)
	c.arrive(t0, 1, 0.010, nil)
	c.arrive(t0, 2, 0.030, nil)
	next, ok := c.nextEvent()
	if !ok || next.Sub(t0) != ms(20) {
		t.Fatalf("nextEvent = %v, %v; want 20ms", next.Sub(t0), ok)
	}
	// Observing half-way changes nothing about the schedule.
	if done := c.advance(t0.Add(ms(7)), nil); len(done) != 0 {
		t.Fatalf("completions at 7ms: %v", done)
	}
	next, _ = c.nextEvent()
	if d := next.Sub(t0) - ms(20); d < -time.Microsecond || d > time.Microsecond {
		t.Fatalf("nextEvent after partial advance = %v, want 20ms", next.Sub(t0))
	}
}

func TestQueueCoreLimit(t *testing.T) {
	for _, ps := range []bool{false, true} {
		c := newQueueCore(2, ps, 3, time.Second)
		var accepted []uint64
		for id := uint64(1); id <= 5; id++ {
			if _, ok := c.arrive(t0, id, 0.010, nil); ok {
				accepted = append(accepted, id)
			}
		}
		if !slices.Equal(accepted, []uint64{1, 2, 3}) {
			t.Errorf("ps=%v: accepted %v, want [1 2 3]", ps, accepted)
		}
		c.advance(t0.Add(time.Second), nil)
		if _, ok := c.arrive(t0.Add(time.Second), 6, 0.010, nil); !ok {
			t.Errorf("ps=%v: refused after the system emptied", ps)
		}
	}
}

func TestQueueCoreUtilization(t *testing.T) {
	// Two servers, one job of 500 ms at t=0: level 1/2 for 0.5 s, then 0.
	c := newQueueCore(2, false, 0, time.Second)
	c.arrive(t0, 1, 0.5, nil)
	done, u := c.utilization(t0.Add(500*time.Millisecond), nil)
	if len(done) != 1 || math.Abs(done[0].utilization-0.5) > 1e-9 {
		t.Fatalf("completion %+v, want utilization 0.5", done)
	}
	if math.Abs(u-0.5) > 1e-9 {
		t.Fatalf("utilization at 0.5s = %v, want 0.5", u)
	}
	// At 1 s: 0.25 s of busy-server time over 1 s, normalised by 2 servers.
	if _, u = c.utilization(t0.Add(time.Second), nil); math.Abs(u-0.25) > 1e-9 {
		t.Fatalf("utilization at 1s = %v, want 0.25", u)
	}
	// Long after, the window has slid past the busy period.
	if _, u = c.utilization(t0.Add(10*time.Second), nil); u != 0 {
		t.Fatalf("utilization at 10s = %v, want 0", u)
	}
}

// A FIFO core that gains servers starts its waiting jobs at once; one that
// loses them lets the jobs in service finish and serves fewer at a time.
func TestQueueCoreSetServers(t *testing.T) {
	c := newQueueCore(1, false, 0, time.Second)
	var done []completion
	for id := uint64(1); id <= 4; id++ {
		done, _ = c.arrive(t0, id, 0.010, done)
	}
	// One server: job 1 runs 0–10 ms, jobs 2–4 wait. At 5 ms four servers:
	// 2, 3 and 4 start at 5 ms and finish at 15 ms.
	done = c.setServers(t0.Add(ms(5)), 4, done[:0])
	done = c.advance(t0.Add(ms(100)), done)
	got := map[uint64]time.Duration{}
	for _, d := range done {
		got[d.id] = d.at.Sub(t0)
	}
	want := map[uint64]time.Duration{1: ms(10), 2: ms(15), 3: ms(15), 4: ms(15)}
	if len(got) != 4 || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] || got[4] != want[4] {
		t.Fatalf("completions %v, want %v", got, want)
	}
	// Back to one server with four jobs in service and one waiting: the
	// four finish, then the waiting one runs alone.
	start := t0.Add(time.Second)
	for id := uint64(10); id <= 14; id++ {
		done, _ = c.arrive(start, id, 0.010, done[:0])
	}
	done = c.setServers(start, 1, done[:0])
	done = c.advance(start.Add(ms(100)), done)
	got = map[uint64]time.Duration{}
	for _, d := range done {
		got[d.id] = d.at.Sub(start)
	}
	if got[10] != ms(10) || got[13] != ms(10) || got[14] != ms(20) {
		t.Fatalf("after losing servers: completions %v, want 10 ms for 10–13 and 20 ms for 14", got)
	}
}

// SetScale changes the demand of later requests; SetWorkers and SetScale
// refuse nonsense.
func TestQueueRuntimeKnobs(t *testing.T) {
	cfg := DefaultQueueConfig()
	cfg.Service = "det:10ms"
	q, err := NewQueue(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.SetScale(2); err != nil || math.Abs(q.Capacity()-200) > 1e-9 {
		t.Fatalf("SetScale(2): %v, capacity %v, want 200", err, q.Capacity())
	}
	if err := q.SetWorkers(8); err != nil || math.Abs(q.Capacity()-400) > 1e-9 {
		t.Fatalf("SetWorkers(8): %v, capacity %v, want 400", err, q.Capacity())
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if q.SetScale(bad) == nil {
			t.Errorf("SetScale(%v) accepted", bad)
		}
	}
	if q.SetWorkers(0) == nil {
		t.Error("SetWorkers(0) accepted")
	}
}
