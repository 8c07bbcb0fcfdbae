// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The baseline proxies to its backend, with and without pooled buffers,
// and sets X-Forwarded-For like sluice does.
func TestBaselineProxies(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello "+r.Header.Get("X-Forwarded-For"))
	}))
	defer backend.Close()
	for _, pooled := range []bool{false, true} {
		rp, err := newBaseline(backend.URL, pooled)
		if err != nil {
			t.Fatal(err)
		}
		front := httptest.NewServer(rp)
		resp, err := http.Get(front.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		front.Close()
		if resp.StatusCode != 200 || string(body) != "hello 127.0.0.1" {
			t.Fatalf("pooled=%v: %d %q", pooled, resp.StatusCode, body)
		}
	}
	if _, err := newBaseline("http://[::1", false); err == nil {
		t.Fatal("bad URL accepted")
	}
	var p bufferPool
	b := p.Get()
	p.Put(b)
	if len(b) != 32<<10 || len(p.Get()) != 32<<10 {
		t.Fatal("buffer size")
	}
}
