package sluice_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice"
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
		return admission{p.slot}, nil
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
func (a admission) Done(ok bool) {
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
