// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"context"
	"math"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

func TestOpenLoopRate(t *testing.T) {
	cases := []struct {
		name     string
		arrivals func(t testing.TB) Config
		wantRate float64
		dur      time.Duration
	}{
		{"constant 200/s", func(t testing.TB) Config { return openConfig(t, nil, mustConstant(t, "200"), 2*time.Second) }, 200, 2 * time.Second},
		{"poisson 200/s", func(t testing.TB) Config { return openConfig(t, nil, mustPoisson(t, "200"), 60*time.Second) }, 200, 60 * time.Second},
		{"constant 5000/s", func(t testing.TB) Config { return openConfig(t, nil, mustConstant(t, "5000"), 2*time.Second) }, 5000, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log hitLog
				cfg := tc.arrivals(t)
				cfg.Transport = handlerTransport{okHandler(&log)}
				start := time.Now()
				res, err := Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				hits := log.all()
				want := tc.wantRate * tc.dur.Seconds()
				if !within(float64(len(hits)), want, 0.05) {
					t.Errorf("server saw %d requests, want %.0f ±5%%", len(hits), want)
				}
				if res.Total.Offered != int64(len(hits)) || res.Total.OK != int64(len(hits)) {
					t.Errorf("offered %d ok %d, server saw %d", res.Total.Offered, res.Total.OK, len(hits))
				}
				if got := res.OfferedRPS(); !within(got, tc.wantRate, 0.05) {
					t.Errorf("offered_rps %.1f, want %.0f ±5%%", got, tc.wantRate)
				}
				// Requests reach the server at their intended times: in virtual
				// time nothing delays them, so none arrives after the run.
				for _, h := range hits {
					if h.at.Sub(start) >= tc.dur {
						t.Fatalf("request at %v, after the %v run", h.at.Sub(start), tc.dur)
					}
				}
				if res.Total.P99 >= time.Microsecond {
					t.Errorf("instant in-memory server: p99 %v, want < 1µs", res.Total.P99)
				}
			})
		})
	}
}

func TestScheduleSwitchesRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log hitLog
		cfg := openConfig(t, okHandler(&log), mustConstant(t, "0s:100,2s:300,4s:50"), 6*time.Second)
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := []int64{100, 100, 300, 300, 50, 50}
		if len(res.Series) < len(want) {
			t.Fatalf("series has %d seconds, want %d", len(res.Series), len(want))
		}
		for i, w := range want {
			if got := res.Series[i].Offered; math.Abs(float64(got-w)) > 1 {
				t.Errorf("second %d: offered %d, want %d ±1", i, got, w)
			}
			if got := res.Series[i].OK; math.Abs(float64(got-w)) > 1 {
				t.Errorf("second %d: ok %d, want %d ±1", i, got, w)
			}
		}
	})
}

func TestClosedLoopThinkTime(t *testing.T) {
	cases := []struct {
		name  string
		users string
		think string
		dur   time.Duration
	}{
		{"one user det 20ms", "1", "det:20ms", 10 * time.Second},
		{"one user exp 0.7s max 7s", "1", "exp:0.7s,max=7s", 5000 * time.Second},
		{"50 users exp 0.7s", "50", "exp:0.7s,max=7s", 200 * time.Second},
		{"5 users det 1s", "5", "det:1s", 100 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log hitLog
				cfg := closedConfig(t, okHandler(&log), tc.users, tc.think, tc.dur)
				res, err := Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				mean := cfg.Think.Mean()
				hits := log.all()
				users := cfg.Users.Max()
				if users == 1 {
					// Mean gap between consecutive requests of the single user,
					// measured at the server.
					var sum time.Duration
					for i := 1; i < len(hits); i++ {
						sum += hits[i].at.Sub(hits[i-1].at)
					}
					got := sum.Seconds() / float64(len(hits)-1)
					if !within(got, mean, 0.05) {
						t.Errorf("mean gap %.4fs over %d requests, want think mean %.4fs ±5%%", got, len(hits), mean)
					}
				}
				// Zero response time: each user sends about Duration/mean requests.
				want := users * tc.dur.Seconds() / mean
				if !within(float64(len(hits)), want, 0.05) {
					t.Errorf("server saw %d requests, want %.0f ±5%%", len(hits), want)
				}
				if got := res.ThinkMean().Seconds(); !within(got, mean, 0.05) {
					t.Errorf("recorded think mean %.4fs, want %.4fs ±5%%", got, mean)
				}
				if res.MaxUsers != int(users) {
					t.Errorf("MaxUsers %d, want %v", res.MaxUsers, users)
				}
			})
		})
	}
}

// TestLatencyIncludesQueueing stalls the server for 500 ms: every request
// intended during the stall must record latency from its intended send time
// to the end of the stall (coordinated omission must not hide it).
func TestLatencyIncludesQueueing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		stallFrom, stallTo := start.Add(time.Second), start.Add(1500*time.Millisecond)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if now := time.Now(); !now.Before(stallFrom) && now.Before(stallTo) {
				time.Sleep(stallTo.Sub(now))
			}
			w.Write([]byte("ok"))
		})
		cfg := openConfig(t, h, mustConstant(t, "100"), 3*time.Second)
		var recs recordLog
		cfg.OnRequest = recs.add
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		stalled := 0
		for _, rr := range recs.all() {
			intended := start.Add(rr.Intended)
			want := time.Duration(0)
			if !intended.Before(stallFrom) && intended.Before(stallTo) {
				want = stallTo.Sub(intended)
				stalled++
			}
			if rr.Latency != want {
				t.Errorf("request intended at %v: latency %v, want %v", rr.Intended, rr.Latency, want)
			}
		}
		if stalled != 50 {
			t.Errorf("%d requests intended during the stall, want 50", stalled)
		}
		// 50 of ~300 requests waited 10..500 ms: p90 and p99 show the stall.
		if res.Total.P99 < 450*time.Millisecond || res.Total.P90 < 100*time.Millisecond {
			t.Errorf("p90 %v p99 %v: the stall is hidden", res.Total.P90, res.Total.P99)
		}
		if s := res.Series[1]; s.P99 < 450*time.Millisecond {
			t.Errorf("second 1: p99 %v, want the stall (~500ms)", s.P99)
		}
	})
}

func TestUsersScheduleSwitches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log hitLog
		cfg := closedConfig(t, okHandler(&log), "0s:10,2s:30,4s:2", "det:100ms", 6*time.Second)
		var users []int
		cfg.Progress = func(p Progress) { users = append(users, p.Users) }
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		// det:100ms think and an instant server: 10 requests/s per user.
		want := []int64{100, 100, 300, 300, 20, 20}
		for i, w := range want {
			if got := res.Series[i].OK; math.Abs(float64(got-w)) > 0.05*float64(w)+1 {
				t.Errorf("second %d: %d requests, want %d", i, got, w)
			}
		}
		if res.MaxUsers != 30 {
			t.Errorf("MaxUsers %d, want 30", res.MaxUsers)
		}
		if len(users) < 5 || users[0] != 10 || users[2] != 30 || users[4] != 2 {
			t.Errorf("active users per second %v, want 10,10,30,30,2,...", users)
		}
	})
}
