// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// Every export sends the header fields that Headers returns at that
// moment: a rotated credential applies to the next export.
func TestHeadersReadPerExport(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Api-Key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	var key atomic.Value
	key.Store("key-one")
	tel, err := New(t.Context(), Options{Endpoint: srv.URL, Traces: true, SampleRatio: 1, ServiceName: "s",
		Headers: func() map[string]string { return map[string]string{"api-key": key.Load().(string)} }})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(t.Context())
	export := func() {
		_, span := tel.StartServer(httptest.NewRequest("GET", "/", nil), "192.0.2.1")
		span.End()
		if err := tel.tp.ForceFlush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	export()
	key.Store("key-two")
	export()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []string{"key-one", "key-two"}) {
		t.Fatalf("exports sent api-key %q, want key-one then key-two", got)
	}
}
