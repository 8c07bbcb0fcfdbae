// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
)

func schedule(t *testing.T, s string) dist.Schedule {
	t.Helper()
	sch, err := dist.ParseSchedule(s)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// instant completes every request at once.
func instant(e *Engine) Handler {
	return HandlerFunc(func(r *Request) { r.Finish(e.Now(), Completed) })
}

// TestClosedLoopThroughput compares N users with think time Z in front of
// a processor-sharing server of demand D with exact mean value analysis:
// R(n) = D(1 + Q(n−1)), X(n) = n/(Z + R(n)), Q(n) = X(n)R(n).
var closedSeed uint64 = 5

func TestClosedLoopThroughput(t *testing.T) {
	const users, z, d = 20, 0.5, 0.02
	var x, r, q float64
	for n := 1; n <= users; n++ {
		r = d * (1 + q)
		x = float64(n) / (z + r)
		q = x * r
	}
	e := New(closedSeed)
	cpu, err := NewCPU(e, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Client view after a 50 s warm-up: response times include the CPU
	// only.
	const warm = 50 * time.Second
	var completed int
	var rtSum float64
	g, err := NewUsers(e, UsersConfig{
		Count:  schedule(t, "20"),
		Think:  exp(t, z),
		Types:  []RequestType{{Demand: exp(t, d)}},
		Target: &Visit{Engine: e, Station: cpu},
		OnFinish: func(r *Request) {
			if r.Finished > warm && r.Outcome == Completed {
				completed++
				rtSum += r.ResponseTime().Seconds()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	e.Run(warm)
	busy, err := NewBusy(e, cpu.Busy, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	e.Run(2050 * time.Second)
	util, err := busy.Utilization(e.Time())
	if err != nil {
		t.Fatal(err)
	}
	gotX, meanRT := float64(completed)/2000, rtSum/float64(completed)
	t.Logf("throughput %.3f/s (MVA %.3f), mean RT %.4f s (MVA %.4f), N/(Z+R) = %.3f", gotX, x, meanRT, r, users/(z+meanRT))
	if math.Abs(gotX-x)/x > 0.02 {
		t.Errorf("throughput %.3f/s, MVA says %.3f/s", gotX, x)
	}
	if math.Abs(meanRT-r)/r > 0.05 {
		t.Errorf("mean response time %.4f s, MVA says %.4f s", meanRT, r)
	}
	// Interactive response time law: X = N/(Z + R).
	if law := users / (z + meanRT); math.Abs(gotX-law)/law > 0.02 {
		t.Errorf("throughput %.3f/s violates N/(Z+R) = %.3f/s", gotX, law)
	}
	if math.Abs(util-x*d) > 0.01 {
		t.Errorf("utilization %.4f, want X·D = %.4f", util, x*d)
	}
}

func TestMarkovNavigation(t *testing.T) {
	p := [][]float64{
		{0.1, 0.6, 0.3},
		{0.5, 0, 0.5},
		{0.2, 0.2, 0.6},
	}
	nav, err := NewMarkov([]float64{1, 0, 0}, p)
	if err != nil {
		t.Fatal(err)
	}
	e := New(6)
	types := []RequestType{{Name: "home"}, {Name: "search"}, {Name: "buy"}}
	var counts [3][3]float64
	var visits [3]float64
	prev := map[int]int{}
	g, err := NewUsers(e, UsersConfig{
		Count: schedule(t, "10"), Think: det(t, 0.01), Types: types, Nav: nav, Target: instant(e),
		OnFinish: func(r *Request) {
			if last, ok := prev[r.User]; ok {
				counts[last][r.Type]++
			}
			prev[r.User] = r.Type
			visits[r.Type]++
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	e.Run(1000 * time.Second)
	for i := range p {
		row := counts[i][0] + counts[i][1] + counts[i][2]
		for j := range p[i] {
			if got := counts[i][j] / row; math.Abs(got-p[i][j]) > 0.01 {
				t.Errorf("P(%d→%d) observed %.4f, want %.2f", i, j, got, p[i][j])
			}
		}
	}
	// Stationary distribution solved by hand from π = πP: π₂ = 2π₀ and
	// π₁ = π₀, so π = (1, 1, 2)/4.
	pi := []float64{0.25, 0.25, 0.5}
	total := visits[0] + visits[1] + visits[2]
	for i := range pi {
		if got := visits[i] / total; math.Abs(got-pi[i]) > 0.01 {
			t.Errorf("visit frequency of %d: %.4f, want %.4f", i, got, pi[i])
		}
	}
}

func TestMarkovValidation(t *testing.T) {
	for _, tc := range []struct {
		start []float64
		p     [][]float64
		want  string
	}{
		{[]float64{1}, nil, "empty"},
		{[]float64{1, 0}, [][]float64{{1, 0}, {0.5, 0.4}}, "row 1 sums to 0.9"},
		{[]float64{1, 0}, [][]float64{{1, 0}, {1}}, "row 1 has 1 entries"},
		{[]float64{1, 0}, [][]float64{{1.5, -0.5}, {1, 0}}, "row 0 entry 1 = -0.5"},
		{[]float64{0.5}, [][]float64{{1, 0}, {1, 0}}, "start distribution has 1 entries"},
		{[]float64{0.5, 0.6}, [][]float64{{1, 0}, {1, 0}}, "start distribution sums to 1.1"},
	} {
		if _, err := NewMarkov(tc.start, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewMarkov(%v, %v) error %v, want %q", tc.start, tc.p, err, tc.want)
		}
	}
}

func TestRetryWaitHonoured(t *testing.T) {
	e := New(1)
	var sends []time.Duration
	var attempts []int
	rejectAll := HandlerFunc(func(r *Request) {
		sends = append(sends, e.Now())
		attempts = append(attempts, r.Attempt)
		r.Finish(e.Now(), Rejected)
	})
	var offered, rejected int
	g, err := NewUsers(e, UsersConfig{Count: schedule(t, "1"), Think: det(t, 1), RetryWait: det(t, 5),
		Types: []RequestType{{}}, Target: rejectAll, OnFinish: func(r *Request) {
			offered++
			if r.Outcome == Rejected {
				rejected++
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	e.Run(20 * time.Second)
	want := []time.Duration{time.Second, 6 * time.Second, 11 * time.Second, 16 * time.Second}
	if len(sends) != len(want) {
		t.Fatalf("sends at %v, want %v", sends, want)
	}
	for i := range want {
		if sends[i] != want[i] || attempts[i] != i {
			t.Errorf("send %d at %v attempt %d, want %v attempt %d", i, sends[i], attempts[i], want[i], i)
		}
	}
	if offered != 4 || rejected != 4 {
		t.Errorf("client view: %d offered, %d rejected, want 4 and 4", offered, rejected)
	}
}

func TestUserCountSchedule(t *testing.T) {
	e := New(2)
	// Each request takes 1 s; think 1 s.
	slow := HandlerFunc(func(r *Request) { e.After(time.Second, func() { r.Finish(e.Now(), Completed) }) })
	active := map[[2]int]bool{} // (window, user)
	g, err := NewUsers(e, UsersConfig{Count: schedule(t, "0s:3,10s:10,20s:2"), Think: det(t, 1),
		Types: []RequestType{{}}, Target: HandlerFunc(func(r *Request) {
			active[[2]int{int(e.Now() / (10 * time.Second)), r.User}] = true
			slow.Handle(r)
		})})
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	e.Run(40 * time.Second)
	count := func(w int) (n int) {
		for k := range active {
			if k[0] == w {
				n++
			}
		}
		return n
	}
	if count(0) != 3 || count(1) != 10 || count(3) != 2 {
		t.Errorf("distinct users per 10 s window: %d, %d, %d, %d; want 3, 10, ≤10, 2", count(0), count(1), count(2), count(3))
	}
	if g.Active() != 2 {
		t.Errorf("Active() = %d", g.Active())
	}
}

func TestOpenMix(t *testing.T) {
	e := New(3)
	var n [2]float64
	src, err := NewOpen(e, OpenConfig{
		Arrivals: dist.Poisson{Rate: schedule(t, "100")},
		Types:    []RequestType{{Name: "static", Size: det(t, 1000)}, {Name: "dynamic", Demand: det(t, 0.01)}},
		Mix:      []float64{1, 3}, Class: 1, Client: 7,
		Target: HandlerFunc(func(r *Request) {
			n[r.Type]++
			if r.Class != 1 || r.Client != 7 || r.User != -1 {
				t.Fatalf("request %+v", r)
			}
			if (r.Type == 0 && r.Size != 1000) || (r.Type == 1 && r.Demand != 0.01) {
				t.Fatalf("request of type %d has demand %v, size %v", r.Type, r.Demand, r.Size)
			}
			r.Finish(e.Now(), Completed)
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	src.Start()
	e.Run(1000 * time.Second)
	if total := n[0] + n[1]; math.Abs(total-1e5)/1e5 > 0.02 || math.Abs(n[1]/total-0.75) > 0.01 {
		t.Errorf("%v requests, dynamic fraction %.4f; want about 100000 and 0.75", total, n[1]/total)
	}
	if src.Sent() != src.Finished() {
		t.Errorf("sent %d, finished %d", src.Sent(), src.Finished())
	}
}

func TestSourceValidation(t *testing.T) {
	e := New(1)
	ok := []RequestType{{}}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{second(NewOpen(e, OpenConfig{Types: ok, Target: instant(e)})), "Arrivals is nil"},
		{second(NewOpen(e, OpenConfig{Arrivals: dist.Poisson{}, Types: ok})), "Target is nil"},
		{second(NewOpen(e, OpenConfig{Arrivals: dist.Poisson{}, Target: instant(e)})), "Types is empty"},
		{second(NewOpen(e, OpenConfig{Arrivals: dist.Poisson{}, Types: ok, Target: instant(e), Mix: []float64{1, 2}})), "2 weights for 1"},
		{second(NewOpen(e, OpenConfig{Arrivals: dist.Poisson{}, Types: ok, Target: instant(e), Mix: []float64{0}})), "not all be 0"},
		{second(NewOpen(e, OpenConfig{Arrivals: dist.Poisson{}, Types: ok, Target: instant(e), Mix: []float64{math.NaN()}})), "Mix[0] = NaN"},
		{second(NewUsers(e, UsersConfig{Types: ok, Target: instant(e)})), "Think is nil"},
		{second(NewUsers(nil, UsersConfig{})), "nil engine"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("error %v, want %q", tc.err, tc.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }
