// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"context"
	"io"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Sample is one request of an open-loop load.
type Sample struct {
	At      time.Time     // intended send time
	Latency time.Duration // from At to the last byte (or the error)
	Status  int           // 0 for a transport error or timeout
	Err     string
}

// Served reports whether the request got a 2xx answer.
func (s Sample) Served() bool { return s.Status >= 200 && s.Status < 300 }

// OpenLoop sends GET url at rate requests per second (evenly spaced) for
// d, each on its own goroutine with client, and returns every request's
// sample in send order. Latency counts from the intended send time, so a
// sender that falls behind does not hide a slow server. It returns early
// if ctx ends.
func OpenLoop(ctx context.Context, client *http.Client, url string, rate float64, d time.Duration) []Sample {
	n := int(math.Round(rate * d.Seconds()))
	out := make([]Sample, n)
	gap := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		at := start.Add(time.Duration(i) * gap)
		if w := time.Until(at); w > 0 {
			select {
			case <-ctx.Done():
				out = out[:i]
				wg.Wait()
				return out
			case <-time.After(w):
			}
		}
		wg.Go(func() {
			s := Sample{At: at}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err == nil {
				var resp *http.Response
				if resp, err = client.Do(req); err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					s.Status = resp.StatusCode
				}
			}
			if err != nil {
				s.Status, s.Err = 0, err.Error()
			}
			s.Latency = time.Since(at)
			out[i] = s
		})
	}
	wg.Wait()
	return out
}

// Summary is a load's outcome.
type Summary struct {
	Requests  int     `json:"requests"`
	Served    int     `json:"served"`     // 2xx
	Rejected  int     `json:"rejected"`   // 503
	Failed    int     `json:"failed"`     // any other status, or no answer
	ServedPct float64 `json:"served_pct"` // 100·Served/Requests
	P50ms     float64 `json:"p50_ms"`     // of the served requests
	P99ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	// Errors are up to five distinct failures, for the report.
	Errors []string `json:"errors,omitempty"`
}

// Summarize counts samples.
func Summarize(ss []Sample) Summary {
	var s Summary
	var lat []float64
	seen := map[string]bool{}
	for _, x := range ss {
		s.Requests++
		switch {
		case x.Served():
			s.Served++
			lat = append(lat, float64(x.Latency)/float64(time.Millisecond))
		case x.Status == http.StatusServiceUnavailable:
			s.Rejected++
		default:
			s.Failed++
			e := x.Err
			if e == "" {
				e = http.StatusText(x.Status)
			}
			if !seen[e] && len(s.Errors) < 5 {
				seen[e] = true
				s.Errors = append(s.Errors, e)
			}
		}
	}
	if s.Requests > 0 {
		s.ServedPct = 100 * float64(s.Served) / float64(s.Requests)
	}
	s.P50ms, s.P99ms, s.MaxMs = quantile(lat, 0.5), quantile(lat, 0.99), quantile(lat, 1)
	return s
}

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	i := int(math.Ceil(q*float64(len(v)))) - 1
	return v[max(0, min(i, len(v)-1))]
}

// Recovery measures how soon after t the requests were served again:
// the time from t to the start of the first one-second bin (of intended
// send times, bins starting at t) from which every later bin has at
// least frac of its requests served, or -1 if none does. rejected counts
// the 503s sent at or after t.
func Recovery(ss []Sample, t time.Time, frac float64) (recovery time.Duration, rejected int) {
	served, rejected := ServedBySecond(ss, t)
	first := -1
	for i := len(served) - 1; i >= 0; i-- {
		if served[i] >= 0 && served[i] < frac {
			break
		}
		first = i
	}
	if first < 0 {
		return -1, rejected
	}
	return time.Duration(first) * time.Second, rejected
}

// ServedBySecond bins the samples sent at or after t by second of their
// intended send time: the fraction served in each second (-1 for a second
// with none), and how many of them were 503s.
func ServedBySecond(ss []Sample, t time.Time) (served []float64, rejected int) {
	type bin struct{ n, ok int }
	var bins []bin
	for _, s := range ss {
		if s.At.Before(t) {
			continue
		}
		if s.Status == http.StatusServiceUnavailable {
			rejected++
		}
		i := int(s.At.Sub(t) / time.Second)
		for len(bins) <= i {
			bins = append(bins, bin{})
		}
		bins[i].n++
		if s.Served() {
			bins[i].ok++
		}
	}
	served = make([]float64, len(bins))
	for i, b := range bins {
		served[i] = -1
		if b.n > 0 {
			served[i] = float64(b.ok) / float64(b.n)
		}
	}
	return served, rejected
}
