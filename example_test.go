// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/policy"
)

// Middleware puts every request through a policy: here auto told an SLO
// of 250 ms on every path. A handler reads the quality level it should
// serve at from its request's context.
func ExampleMiddleware() {
	pol, err := policy.New(policy.Auto(250*time.Millisecond), policy.Options{})
	if err != nil {
		panic(err) // a *sluice.FieldError naming the setting
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go pol.Run(ctx) // the control loop, until ctx ends

	mux := http.NewServeMux()
	mux.HandleFunc("/search", func(w http.ResponseWriter, r *http.Request) {
		q := sluice.QualityFrom(r.Context()) // 1 = full service
		fmt.Fprintf(w, "quality %g\n", q)
	})
	handler := sluice.Middleware(pol)(mux)

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/search?q=x", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output: 200 quality 1
}

// oneAtATime is a Policy of its own: one request at a time, the others
// refused at once.
type oneAtATime struct{ slot chan struct{} }

func (p oneAtATime) Admit(r *http.Request) (sluice.Admission, error) {
	select {
	case p.slot <- struct{}{}:
		return admission(p), nil
	default:
		return nil, fmt.Errorf("busy: %w", sluice.ErrRejected)
	}
}

func (p oneAtATime) Reject(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Retry-After", "1")
	http.Error(w, err.Error(), http.StatusServiceUnavailable)
}

// admission is one admitted request of oneAtATime.
type admission struct{ slot chan struct{} }

func (a admission) Quality() float64 { return 1 }
func (a admission) Stream()          { <-a.slot } // a stream holds no slot
func (a admission) Done(sluice.Outcome) {
	select {
	case <-a.slot:
	default: // already released by Stream
	}
}

// Middleware takes any sluice.Policy: Admit decides (an error wrapping
// sluice.ErrRejected refuses), Reject writes the refusal, and the
// Admission is finished with Done exactly once.
func ExampleMiddleware_ownPolicy() {
	pol := oneAtATime{slot: make(chan struct{}, 1)}
	inside := make(chan struct{})
	release := make(chan struct{})
	handler := sluice.Middleware(pol)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside <- struct{}{}
		<-release
	}))

	first := httptest.NewRecorder()
	go handler.ServeHTTP(first, httptest.NewRequest("GET", "/", nil))
	<-inside // the first request holds the slot
	second := httptest.NewRecorder()
	handler.ServeHTTP(second, httptest.NewRequest("GET", "/", nil))
	close(release)
	fmt.Println(second.Code, second.Header().Get("Retry-After"))
	// Output: 503 1
}

// A handler reads the quality level its stage hands it and does less
// work below 1.
func ExampleQualityFrom() {
	search := func(w http.ResponseWriter, r *http.Request) {
		q := sluice.QualityFrom(r.Context()) // 1 = full service; 1 when not set
		results := max(1, int(10*q))         // fewer results, cheaper ranking, no thumbnails…
		fmt.Fprintln(w, results, "results")
	}
	r := httptest.NewRequest("GET", "/search", nil)
	rec := httptest.NewRecorder()
	search(rec, r.WithContext(sluice.WithQuality(r.Context(), 0.5))) // as a degrading stage would
	fmt.Print(rec.Body.String())
	// Output: 5 results
}

// Behind the middleware, a handler's context carries the request's
// deadline and what travels on to the next hop; sluice's client side
// stamps them on the calls made with it.
func ExampleHopFrom() {
	inventory := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("inventory: priority", r.Header.Get(sluice.PriorityHeader))
	}))
	defer inventory.Close()
	rt, err := client.New(http.DefaultTransport, client.DefaultConfig(), client.Options{})
	if err != nil {
		panic(err)
	}
	calls := &http.Client{Transport: rt}

	search := func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()         // its deadline: the earlier of the request's and its timeout header's
		hop := sluice.HopFrom(ctx) // hop.Priority, hop.Tenant: what travels on
		req, _ := http.NewRequestWithContext(ctx, "GET", inventory.URL+"/items", nil)
		resp, err := calls.Do(req) // the priority, the tenant and the time left go with it
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		fmt.Fprintln(w, "search: priority", hop.Priority)
	}

	// A policy that believes the hop headers of 192.0.2.0/24.
	pol, err := policy.New(policy.Config{Classes: policy.ClassesConfig{TrustedProxies: []string{"192.0.2.0/24"}}}, policy.Options{})
	if err != nil {
		panic(err)
	}
	r := httptest.NewRequest("GET", "/search", nil) // from 192.0.2.1
	r.Header.Set(sluice.PriorityHeader, "CRITICAL")
	rec := httptest.NewRecorder()
	sluice.Middleware(pol)(http.HandlerFunc(search)).ServeHTTP(rec, r)
	fmt.Print(rec.Body.String())
	// Output:
	// inventory: priority CRITICAL
	// search: priority CRITICAL
}
