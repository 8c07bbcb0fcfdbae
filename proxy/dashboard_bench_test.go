// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// BenchmarkUISample is the dashboard sampler's work once a second: read
// the state of a proxy with three stages (seda, yaksha, static-rate) and
// the implicit one, compute the rates and encode the sample. Its time per
// operation is the CPU the dashboard takes per second whatever the number
// of viewers (each of whom then costs one write of the encoded bytes).
func BenchmarkUISample(b *testing.B) {
	srv := benchServer(b, uiBenchConfig, Options{})
	now := time.Now().Add(time.Hour)
	srv.h.gen.Load().pol.Step(now)
	var size int
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, enc := srv.dash.SampleAt(now.Add(time.Duration(i) * time.Second))
		size = len(enc)
	}
	b.ReportMetric(float64(size), "bytes/sample")
}

// BenchmarkUIFiveViewers is one second of the dashboard with five viewers
// on real loopback connections: take a sample, and wait until each of the
// five event streams has delivered it. ns/op is the dashboard's cost per
// second of wall time (sampler, encoding and the five writes, plus the
// five readers' own work, which in production is the browsers').
func BenchmarkUIFiveViewers(b *testing.B) {
	srv := benchServer(b, uiBenchConfig, Options{Logger: slog.New(slog.DiscardHandler)})
	srv.manual = true // the benchmark takes the samples
	if err := srv.Listen(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	now := time.Now().Add(time.Hour)
	srv.h.gen.Load().pol.Step(now)
	srv.dash.SampleAt(now)
	got := make(chan struct{}, 1024)
	for range 5 {
		resp, err := http.Get("http://" + srv.AdminAddr().String() + "/ui/events")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		go func() {
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				if bytes.HasPrefix(line, []byte("id: ")) {
					got <- struct{}{}
				}
			}
		}()
	}
	for range 5 { // the first sample, replayed to each
		<-got
	}
	for i := 1; b.Loop(); i++ {
		srv.dash.SampleAt(now.Add(time.Duration(i) * time.Second))
		for range 5 {
			<-got
		}
	}
}

// uiBenchConfig is a proxy with three stages (seda, yaksha, static-rate)
// and the implicit one; its backend is never contacted.
var uiBenchConfig = baseConfig("http://127.0.0.1:1", `stages:
  - {name: web, match: {path_prefix: /web}, controller: seda, params: {target: 100ms}}
  - {name: api, match: {path_prefix: /api}, controller: yaksha, params: {tref: 100ms}}
  - {name: st, match: {path_prefix: /st}, controller: static-rate, params: {rate: 100}}
`)
