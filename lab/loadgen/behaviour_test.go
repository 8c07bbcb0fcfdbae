// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestClassesAndClientsSent(t *testing.T) {
	classes, _ := ParseWeighted("--classes", "gold:0.2,bronze:0.8")
	clients, _ := ParseWeighted("--clients", "A,B")
	cases := []struct {
		name string
		cfg  func(t testing.TB, h http.Handler) Config
	}{
		{"closed 100 users", func(t testing.TB, h http.Handler) Config {
			return closedConfig(t, h, "100", "det:100ms", 10*time.Second)
		}},
		{"open 1000/s", func(t testing.TB, h http.Handler) Config {
			return openConfig(t, h, mustPoisson(t, "1000"), 10*time.Second)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log hitLog
				cfg := tc.cfg(t, okHandler(&log))
				cfg.Classes, cfg.Clients = classes, clients
				cfg.ClassHeader = "X-Tier"
				res, err := Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				count := map[string]int{}
				hits := log.all()
				for _, h := range hits {
					count["class="+h.header.Get("X-Tier")]++
					count["client="+h.header.Get("X-Client-Id")]++
				}
				n := float64(len(hits))
				for k, want := range map[string]float64{"class=gold": 0.2, "class=bronze": 0.8, "client=A": 0.5, "client=B": 0.5} {
					if got := float64(count[k]) / n; !within(got, want, 0.05) {
						t.Errorf("%s: share %.3f, want %.2f ±5%% (counts %v)", k, got, want, count)
					}
				}
				if got := res.ByClass["gold"].OK; got != int64(count["class=gold"]) {
					t.Errorf("ByClass[gold].OK = %d, server saw %d", got, count["class=gold"])
				}
				if got := res.ByClient["B"].OK; got != int64(count["client=B"]) {
					t.Errorf("ByClient[B].OK = %d, server saw %d", got, count["client=B"])
				}
				if len(res.SeriesByClass["gold"]) != len(res.Series) {
					t.Errorf("class series has %d rows, total %d", len(res.SeriesByClass["gold"]), len(res.Series))
				}
			})
		})
	}
}

func TestRejectedAndRetryWait(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log hitLog
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					log.add(r)
					w.WriteHeader(status)
				})
				cfg := closedConfig(t, h, "1", "det:10ms", 21*time.Second)
				cfg.RetryWait = 5 * time.Second
				res, err := Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				hits := log.all()
				// The first request goes out at a random phase of the 10 ms
				// think time, then one retry every 5 s.
				if len(hits) != 5 {
					t.Fatalf("server saw %d requests, want 5", len(hits))
				}
				for i := 1; i < len(hits); i++ {
					if gap := hits[i].at.Sub(hits[i-1].at); gap != 5*time.Second {
						t.Errorf("gap %d: %v, want the 5s retry wait", i, gap)
					}
					if hits[i].path != hits[0].path {
						t.Errorf("retry %d sent %s, want the same request %s", i, hits[i].path, hits[0].path)
					}
				}
				tot := res.Total
				if tot.Rejected != 5 || tot.OK != 0 || tot.Errors != 0 || tot.Completed != 5 {
					t.Errorf("counts %+v, want 5 rejected", tot)
				}
				if res.Retries != 5 || res.Thinks != 0 {
					t.Errorf("retries %d thinks %d, want 5 and 0", res.Retries, res.Thinks)
				}
				if res.Total.Latency.TotalCount() != 0 || res.Total.RejectedLatency.TotalCount() != 5 {
					t.Errorf("rejections must not be latency samples of OK responses")
				}
			})
		})
	}
}

func TestStatusClassification(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		statuses := map[string]int{"/ok": 200, "/redirect": 302, "/missing": 404, "/broken": 500, "/busy": 503, "/slow-down": 429}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/ok")
			w.WriteHeader(statuses[r.URL.Path])
			w.Write([]byte("12345"))
		})
		cfg := openConfig(t, h, mustConstant(t, "60"), time.Second)
		cfg.Workload = mustURLs(t, "/ok,/redirect,/missing,/broken,/busy,/slow-down")
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		bt := res.ByType
		check := func(typ string, got, want int64) {
			t.Helper()
			if got != want {
				t.Errorf("%s: %d, want %d", typ, got, want)
			}
		}
		for _, p := range []string{"/ok", "/redirect"} {
			check(p+" ok", bt[p].OK, bt[p].Offered)
		}
		for _, p := range []string{"/missing", "/broken"} {
			check(p+" http errors", bt[p].HTTPErrors, bt[p].Offered)
			check(p+" errors", bt[p].Errors, bt[p].Offered)
		}
		for _, p := range []string{"/busy", "/slow-down"} {
			check(p+" rejected", bt[p].Rejected, bt[p].Offered)
		}
		tot := res.Total
		check("completed", tot.Completed, tot.Offered)
		check("bytes", tot.Bytes, 5*tot.Offered)
	})
}

func TestTimeoutsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				select {
				case <-time.After(2 * time.Second):
				case <-r.Context().Done():
				}
			}
			w.Write([]byte("x"))
		})
		cfg := openConfig(t, h, mustConstant(t, "100"), 2*time.Second)
		cfg.Workload = mustURLs(t, "/slow,/fast")
		cfg.Timeout = 100 * time.Millisecond
		var recs recordLog
		cfg.OnRequest = recs.add
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		slow, fast := res.ByType["/slow"], res.ByType["/fast"]
		if slow.Timeouts != slow.Offered || slow.Timeouts == 0 || slow.Completed != 0 {
			t.Errorf("/slow: %+v, want every request timed out", slow.Counts)
		}
		if fast.OK != fast.Offered || fast.Timeouts != 0 {
			t.Errorf("/fast: %+v, want every request ok", fast.Counts)
		}
		if res.Total.Latency.TotalCount() != fast.OK {
			t.Errorf("latency samples %d, want only the %d OK requests", res.Total.Latency.TotalCount(), fast.OK)
		}
		for _, r := range recs.all() {
			if r.Outcome == "timeout" && r.Latency != 100*time.Millisecond {
				t.Errorf("timeout after %v, want the 100ms deadline", r.Latency)
			}
		}
	})
}

func TestMaxInflightDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Second)
		})
		cfg := openConfig(t, h, mustConstant(t, "100"), 3*time.Second)
		cfg.MaxInflight = 10
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		tot := res.Total
		if res.MaxInflight != 10 {
			t.Errorf("MaxInflight %d, want 10", res.MaxInflight)
		}
		// Each second the 10 workers take 10 arrivals; the others are dropped.
		if tot.OK < 25 || tot.OK > 30 || tot.Dropped != tot.Offered-tot.OK {
			t.Errorf("counts %+v: want ~30 OK and the rest dropped", tot)
		}
		if tot.Errors != tot.Dropped || res.ByType[noneType].Dropped != tot.Dropped {
			t.Errorf("drops must count as errors with type %q: %+v", noneType, tot)
		}
	})
}

func TestInterruptWritesPartialResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hang" {
				<-r.Context().Done()
				return
			}
			w.Write([]byte("ok"))
		})
		cfg := openConfig(t, h, mustConstant(t, "100"), 10*time.Second)
		cfg.Workload = mustURLs(t, "/hang:1,/a:9")
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(2500*time.Millisecond, cancel)
		res, err := Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Interrupted || res.Elapsed != 2500*time.Millisecond {
			t.Errorf("Interrupted %v Elapsed %v, want true and 2.5s", res.Interrupted, res.Elapsed)
		}
		tot := res.Total
		if tot.Offered < 245 || tot.Offered > 250 {
			t.Errorf("offered %d, want ~250 in 2.5s at 100/s", tot.Offered)
		}
		// Every hanging request is aborted; a request sent at the very instant
		// of the cancellation may be aborted too.
		hang := res.ByType["/hang"].Offered
		if hang == 0 || tot.Aborted < hang || tot.Aborted > hang+1 || tot.Timeouts != 0 {
			t.Errorf("counts %+v hang %+v: hanging requests must be aborted, not timeouts", tot.Counts, res.ByType["/hang"].Counts)
		}
		dir := filepath.Join(t.TempDir(), "out")
		if err := res.WriteDir(dir); err != nil {
			t.Fatal(err)
		}
		var sum map[string]any
		data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &sum); err != nil {
			t.Fatal(err)
		}
		if sum["interrupted"] != 1.0 || sum["offered"] != float64(tot.Offered) {
			t.Errorf("summary interrupted=%v offered=%v", sum["interrupted"], sum["offered"])
		}
	})
}

func TestWriteDirFiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(3 * time.Millisecond)
			if r.URL.Path == "/b" {
				w.WriteHeader(503)
			}
			w.Write([]byte("body"))
		})
		cfg := closedConfig(t, h, "0s:2,1s:8", "exp:50ms", 3*time.Second)
		cfg.Workload = mustURLs(t, "/a:3,/b:1")
		cfg.Classes, _ = ParseWeighted("--classes", "gold:1,bronze:3")
		cfg.Clients, _ = ParseWeighted("--clients", "c1,c2")
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := res.WriteDir(dir); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		var sum map[string]any
		if err := json.Unmarshal(data, &sum); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"scenario", "mode", "seed", "offered_rps", "completed_rps", "rejected", "errors", "timeouts",
			"p50_ms", "p90_ms", "p99_ms", "duration_s", "requests", "ok", "bytes", "goodput_rps",
			"users_max", "think_mean_ms", "type._a.p99_ms", "type._b.rejected", "class.gold.offered", "client.c2.goodput_rps"} {
			if _, ok := sum[k]; !ok {
				t.Errorf("summary.json lacks %q", k)
			}
		}
		if sum["mode"] != "closed" || sum["users_max"] != 8.0 {
			t.Errorf("mode %v users_max %v", sum["mode"], sum["users_max"])
		}
		if p := sum["p50_ms"].(float64); p < 2.9 || p > 3.1 {
			t.Errorf("p50_ms %v, want the 3ms service time", p)
		}
		head := "offered,completed,ok,rejected,errors,timeouts,dropped,aborted,bytes,p50_ms,p90_ms,p99_ms"
		for file, prefix := range map[string]string{
			"timeseries.csv":           "t_s," + head,
			"timeseries_by_type.csv":   "t_s,type," + head,
			"timeseries_by_class.csv":  "t_s,class," + head,
			"timeseries_by_client.csv": "t_s,client," + head,
			"latency.hgrm":             "# latency in ms",
			"latency_rejected.hgrm":    "# latency in ms",
			"latency.hlog":             "#[",
			"hgrm/type._a.hgrm":        "# latency in ms",
		} {
			data, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Error(err)
				continue
			}
			if !strings.HasPrefix(string(data), prefix) {
				t.Errorf("%s starts with %q, want %q", file, firstLine(string(data)), prefix)
			}
		}
		csv, _ := os.ReadFile(filepath.Join(dir, "timeseries_by_type.csv"))
		if lines := strings.Count(string(csv), "\n"); lines != 1+2*len(res.Series) {
			t.Errorf("timeseries_by_type.csv has %d lines, want %d", lines, 1+2*len(res.Series))
		}
	})
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
