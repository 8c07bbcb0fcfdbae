// SPDX-License-Identifier: Apache-2.0

package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
)

// New wraps a RoundTripper: every call carries the request's priority,
// tenant and time left to the next hop, is throttled when the
// destination refuses calls, and retried within a budget.
func ExampleNew() {
	inventory := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("priority", r.Header.Get(sluice.PriorityHeader), "timeout set:", r.Header.Get(sluice.TimeoutHeader) != "")
	}))
	defer inventory.Close()
	reg := prometheus.NewRegistry()

	rt, err := client.New(http.DefaultTransport, client.DefaultConfig(),
		client.Options{Registerer: reg}) // sluice_client_* per destination
	if err != nil {
		panic(err) // a *sluice.FieldError
	}
	httpClient := &http.Client{Transport: rt}

	// In a handler behind sluice's middleware, r.Context() carries the
	// request's deadline and priority: pass it on. Here they are set by hand.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ctx = sluice.WithHop(ctx, sluice.Hop{Priority: "CRITICAL"})
	req, _ := http.NewRequestWithContext(ctx, "GET", inventory.URL+"/items/7", nil)
	resp, err := httpClient.Do(req)
	if errors.Is(err, client.ErrThrottled) || errors.Is(err, client.ErrDeadline) {
		return // refused before sending: answer the caller at once
	}
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// priority CRITICAL timeout set: true
	// 200
}
