// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestLoadFlagErrors(t *testing.T) {
	const tgt = "--target=http://127.0.0.1:9"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"load", "--rate", "10"}, "--target is required"},
		{[]string{"load", "--target", "http://10.1.2.3:80/", "--rate", "10"}, "--target"},
		{[]string{"load", "--target", "http://example.com/", "--rate", "10"}, "not a loopback"},
		{[]string{"load", tgt}, "choose a load"},
		{[]string{"load", tgt, "--rate", "10", "--users", "3"}, "exclude each other"},
		{[]string{"load", tgt, "--rate", "-1"}, "--rate: -1 must be a positive"},
		{[]string{"load", tgt, "--rate", "10", "--schedule", "0s:5"}, "--rate and --schedule"},
		{[]string{"load", tgt, "--schedule", "0s:5,x:3"}, `--schedule "0s:5,x:3"`},
		{[]string{"load", tgt, "--rate", "10", "--arrival", "bursty"}, `--arrival: "bursty"`},
		{[]string{"load", tgt, "--rate", "10", "--think", "det:1s"}, "--think applies to closed loop"},
		{[]string{"load", tgt, "--rate", "10", "--max-inflight", "0"}, "--max-inflight: 0"},
		{[]string{"load", tgt, "--users", "0"}, "--users: 0"},
		{[]string{"load", tgt, "--users", "3", "--arrival", "constant"}, "--arrival applies to open loop"},
		{[]string{"load", tgt, "--users", "3", "--think", "exp:-1s"}, `--think "exp:-1s"`},
		{[]string{"load", tgt, "--users-schedule", "0s:0"}, "--users-schedule"},
		{[]string{"load", tgt, "--users", "3", "--retry-wait", "-1s"}, "--retry-wait"},
		{[]string{"load", tgt, "--rate", "1", "--duration", "0s"}, "--duration: 0s"},
		{[]string{"load", tgt, "--rate", "1", "--timeout", "0s"}, "--timeout: 0s"},
		{[]string{"load", tgt, "--rate", "1", "--classes", "gold:0"}, "--classes"},
		{[]string{"load", tgt, "--rate", "1", "--clients", "a,a"}, "--clients"},
		{[]string{"load", tgt, "--rate", "1", "--source-addrs", "10.0.0.1"}, "--source-addrs: 10.0.0.1 is not in 127.0.0.0/8"},
		{[]string{"load", tgt, "--rate", "1", "--clients", "a,b", "--source-addrs", "127.0.0.2"}, "--source-addrs: 1 addresses but --clients has 2"},
		{[]string{"load", tgt, "--rate", "1", "--urls", "/a", "--paths", "/b"}, "exclude each other"},
		{[]string{"load", tgt, "--rate", "1", "--workload", "ftp"}, `--workload: "ftp"`},
		{[]string{"load", tgt, "--rate", "1", "--workload", "markov"}, "--workload markov needs --markov"},
		{[]string{"load", tgt, "--rate", "1", "--workload", "surge", "--paths", "/a"}, "drop --paths"},
		{[]string{"load", tgt, "--rate", "1", "--mix", "ordering"}, "--mix applies to --workload tpcw"},
		{[]string{"load", tgt, "--rate", "1", "--workload", "tpcw", "--mix", "lunch"}, "--mix"},
		{[]string{"load", tgt, "--rate", "1", "--paths", "/a:x"}, "--paths"},
		{[]string{"load", tgt, "--rate", "1", "--paths", "http://8.8.8.8/"}, "not a loopback"},
		{[]string{"load", tgt, "--rate", "1", "--markov", "/nonexistent.yaml"}, "--markov"},
		{[]string{"load", tgt, "--rate", "1", "--class-header", "bad header"}, "ClassHeader"},
		{[]string{"load", tgt, "--rate", "1", "--bogus"}, "unknown flag"},
	}
	for _, c := range cases {
		wantUsageError(t, c.args, c.want)
	}
}

func TestLoadRunWritesResults(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.Header.Get("X-Sluice-Class") == "" {
			w.WriteHeader(400)
		}
		w.Write([]byte("hello"))
	}))
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "run")
	code, out, errOut := runCLI(t, "load", "--target", srv.URL+"/x", "--rate", "50", "--arrival", "constant",
		"--duration", "1s", "--classes", "gold:1,bronze:1", "--out", dir, "--log-requests")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out, "load target open 1.0s: offered 49.0/s") || !strings.Contains(out, dir) {
		t.Errorf("one-line summary %q", out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	if sum["ok"] != 49.0 || sum["errors"] != 0.0 || sum["type._x.ok"] != 49.0 || n.Load() != 49 {
		t.Errorf("summary ok=%v errors=%v type._x.ok=%v; server saw %d", sum["ok"], sum["errors"], sum["type._x.ok"], n.Load())
	}
	reqs, err := os.ReadFile(filepath.Join(dir, "requests.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(reqs), "\n"); lines != 50 {
		t.Errorf("requests.csv has %d lines, want header + 49", lines)
	}
	for _, f := range []string{"timeseries.csv", "timeseries_by_class.csv", "latency.hgrm", "latency.hlog", "command.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	// Not a terminal: plain progress lines (a 1 s run prints the final one).
	if strings.Contains(errOut, "\r") {
		t.Errorf("progress bar written to a non-terminal: %q", errOut)
	}
}

func TestLoadMetaUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	code, _, errOut := runCLI(t, "load", "--target", srv.URL, "--users", "2", "--workload", "tpcw", "--duration", "1s", "--out", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "/_meta: status 404") {
		t.Errorf("exit %d stderr %q, want exit 1 naming /_meta", code, errOut)
	}
}
