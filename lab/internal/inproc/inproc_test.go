// SPDX-License-Identifier: Apache-2.0

package inproc

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A started proxy forwards to its backend and answers its admin
// listener's /healthz.
func TestStart(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") }))
	defer be.Close()
	srv := Start(t, `listeners: [{addr: 127.0.0.1:0}]
admin: {addr: 127.0.0.1:0}
backends: {servers: [{url: "`+be.URL+`"}]}
`)
	for url, want := range map[string]string{"http://" + srv.Addrs()[0].String() + "/": "hello", "http://" + srv.AdminAddr().String() + "/healthz": ""} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d %q", url, resp.StatusCode, b)
		}
	}
}
