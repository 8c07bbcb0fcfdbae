// SPDX-License-Identifier: Apache-2.0

package sharetest

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Clients on a loopback server: each is identified by its header, gets
// bytes while active and none once idle, and a refusal counts as a
// failure.
func TestClients(t *testing.T) {
	body := make([]byte, 1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Client") {
		case "a", "b":
			w.Write(body)
		default:
			http.Error(w, "no", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	c := Start(srv.URL, "X-Client", []string{"a", "b", "z"})
	x := c.Window(0, 200*time.Millisecond)
	if x[0] <= 0 || x[1] <= 0 || x[2] != 0 {
		t.Errorf("bytes/s %v, want a and b > 0, z 0", x)
	}
	c.Idle(0)
	x = c.Window(100*time.Millisecond, 200*time.Millisecond)
	if x[0] != 0 || x[1] <= 0 {
		t.Errorf("with a idle: bytes/s %v, want a 0 and b > 0", x)
	}
	c.Stop()
	if c.Failures() == 0 {
		t.Error("z's 503s were not counted as failures")
	}
}
