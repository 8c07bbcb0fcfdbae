// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/lab/internal/grpctest"
	"github.com/sluicehq/sluice/lab/testbed"
)

func TestTestbedUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"testbed"}, "KIND required"},
		{[]string{"testbed", "mainframe"}, `unknown command "mainframe"`},
		{[]string{"testbed", "queue", "--workers", "0"}, "--workers=0"},
		{[]string{"testbed", "queue", "--discipline", "lifo"}, `--discipline="lifo"`},
		{[]string{"testbed", "queue", "--service", "gauss:3"}, "--service="},
		{[]string{"testbed", "queue", "--queue-limit", "-1"}, "--queue-limit=-1"},
		{[]string{"testbed", "queue", "--listen", "0.0.0.0:8081"}, "--allow-public"},
		{[]string{"testbed", "queue", "--listen", ":8081"}, "not a loopback address"},
		{[]string{"testbed", "cgi", "--work", "/x=0"}, "--work"},
		{[]string{"testbed", "cgi", "--cpu-ns-per-number", "-2"}, "cpu_ns_per_number -2"},
		{[]string{"testbed", "static", "--files", "0"}, "--files=0"},
		{[]string{"testbed", "static", "--dynamic-fraction", "1.5"}, "--dynamic-fraction=1.5"},
		{[]string{"testbed", "bookstore", "--scale", "0"}, "--scale=0"},
		{[]string{"testbed", "bookstore", "--db", "mysql://x"}, `--db="mysql://x"`},
		{[]string{"testbed", "queue", "--workers", "many"}, "invalid argument"},
	}
	for _, tt := range tests {
		wantUsageError(t, tt.args, tt.want)
	}
}

// TestTestbedServes starts each cheap kind on a free loopback port, asks it
// for /_meta and a page, stops it like Ctrl-C would, and checks the summary.
func TestTestbedServes(t *testing.T) {
	tests := []struct {
		args []string
		kind string
		path string
	}{
		{[]string{"queue", "--workers", "2", "--service", "det:1ms"}, "queue", "/anything"},
		{[]string{"cgi", "--work", "/=1000"}, "cgi", "/x"},
		{[]string{"static", "--files", "30", "--max-size", "262144"}, "static", ""},
		{[]string{"bookstore", "--data", ""}, "bookstore", "/home"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := startCLI(t, ctx, append([]string{"testbed", "--listen", "127.0.0.1:0"}, tt.args...)...)
			lines := r.lines
			m := regexp.MustCompile(`^testbed (\w+) listening on (http://127\.0\.0\.1:\d+) `).FindStringSubmatch(lines.Text())
			if m == nil || m[1] != tt.kind {
				t.Fatalf("first line %q", lines.Text())
			}
			base := m[2]
			var meta struct {
				Kind  string `json:"kind"`
				Files []struct {
					Path string `json:"path"`
				} `json:"files"`
			}
			resp, err := http.Get(base + "/_meta")
			if err != nil {
				t.Fatal(err)
			}
			err = json.NewDecoder(resp.Body).Decode(&meta)
			resp.Body.Close()
			if err != nil || meta.Kind != tt.kind {
				t.Fatalf("/_meta kind %q, %v", meta.Kind, err)
			}
			path := tt.path
			if path == "" {
				path = meta.Files[0].Path
			}
			resp, err = http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("X-Sluice-Utilization") == "" {
				t.Fatalf("GET %s: %s, utilization %q", path, resp.Status, resp.Header.Get("X-Sluice-Utilization"))
			}
			cancel()
			if !lines.Scan() || !strings.HasPrefix(lines.Text(), "testbed "+tt.kind+": served 1 requests (0 rejected, 0 errors)") {
				t.Errorf("summary line %q", lines.Text())
			}
			if err := r.wait(); err != nil {
				t.Errorf("exit error %v, stderr %q", err, r.errOut.String())
			}
		})
	}
}

// TestTestbedGRPCServes starts `testbed grpc` on a free loopback port,
// makes one call, stops it like Ctrl-C would, and checks the summary;
// with --record and --control the same port answers the chain
// experiments' HTTP endpoints too.
func TestTestbedGRPCServes(t *testing.T) {
	for _, extra := range [][]string{nil, {"--record", "--control"}} {
		t.Run(strings.Join(append([]string{"grpc"}, extra...), " "), func(t *testing.T) {
			testbedGRPCServes(t, extra)
		})
	}
}

func testbedGRPCServes(t *testing.T, extra []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := startCLI(t, ctx, append([]string{"testbed", "--listen", "127.0.0.1:0", "grpc", "--workers", "2", "--service", "det:1ms"}, extra...)...)
	lines := r.lines
	m := regexp.MustCompile(`^testbed grpc listening on http://(127\.0\.0\.1:\d+) \(h2c`).FindStringSubmatch(lines.Text())
	if m == nil {
		t.Fatalf("first line %q", lines.Text())
	}
	cc := grpctest.Dial(t, m[1])
	if _, err := testpb.NewTestServiceClient(cc).UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 8}); err != nil {
		t.Fatal(err)
	}
	if len(extra) > 0 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m[1]+"/_records", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := testbed.ParseQueueRecords(res.Body)
		res.Body.Close()
		if err != nil || len(recs) != 1 {
			t.Errorf("GET /_records: %d records (%v), want the call's", len(recs), err)
		}
	}
	cancel()
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "testbed grpc: served 1 calls (0 rejected, 0 errors)") {
		t.Errorf("summary line %q", lines.Text())
	}
	if err := r.wait(); err != nil {
		t.Errorf("exit error %v, stderr %q", err, r.errOut.String())
	}
}

// cliRun is the lab's command line running in the background; lines
// reads its output.
type cliRun struct {
	lines  *bufio.Scanner
	out    *io.PipeReader
	errOut bytes.Buffer
	done   chan error
}

// startCLI runs the command line args until ctx ends and reads its first
// output line; the test fails without one.
func startCLI(t *testing.T, ctx context.Context, args ...string) *cliRun {
	t.Helper()
	pr, pw := io.Pipe()
	r := &cliRun{lines: bufio.NewScanner(pr), out: pr, done: make(chan error, 1)}
	root := newRootCmd(pw, &r.errOut)
	root.SetArgs(args)
	go func() {
		err := root.ExecuteContext(ctx)
		pw.Close()
		r.done <- err
	}()
	if !r.lines.Scan() { // the output ended: so has the command
		t.Fatalf("%s: no output; stderr %q, err %v", strings.Join(args, " "), r.errOut.String(), <-r.done)
	}
	return r
}

// wait discards the rest of the output and returns the command's error.
func (r *cliRun) wait() error {
	io.Copy(io.Discard, r.out)
	return <-r.done
}

// startCmd runs the lab's command line args until the test ends and
// returns its first output line.
func startCmd(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := startCLI(t, ctx, args...) // when it fails, the command has ended
	t.Cleanup(func() {
		cancel()
		if err := r.wait(); err != nil {
			t.Errorf("%s: exit error %v, stderr %q", strings.Join(args, " "), err, r.errOut.String())
		}
	})
	return r.lines.Text()
}

// A gRPC chain by hand: `testbed grpc --record` behind `testbed tier
// --grpc` in both modes; a call through the tier reaches the backend with
// its x-lab-deadline, and the tier answers /healthz on the same port.
func TestTestbedTierGRPC(t *testing.T) {
	first := startCmd(t, "testbed", "--listen", "127.0.0.1:0", "grpc", "--workers", "2", "--service", "det:1ms", "--record")
	m := regexp.MustCompile(`listening on http://(127\.0\.0\.1:\d+) `).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("backend's first line %q", first)
	}
	backend := m[1]
	for i, mode := range []string{"grpc-go", "sluice"} {
		first := startCmd(t, "testbed", "--listen", "127.0.0.1:0", "tier", "--grpc", "--mode", mode, "--next", "http://"+backend)
		m := regexp.MustCompile(`^testbed tier listening on http://(127\.0\.0\.1:\d+) \(gRPC over h2c, mode ` + mode).FindStringSubmatch(first)
		if m == nil {
			t.Fatalf("%s tier's first line %q", mode, first)
		}
		cc := grpctest.Dial(t, m[1])
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md := metadata.AppendToOutgoingContext(ctx, "x-lab-deadline", "1000000000")
		if _, err := testpb.NewTestServiceClient(cc).UnaryCall(md, &testpb.SimpleRequest{}); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		res, err := http.Get("http://" + m[1] + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s tier /healthz: %s", mode, res.Status)
		}
		res, err = http.Get("http://" + backend + "/_records")
		if err != nil {
			t.Fatal(err)
		}
		recs, err := testbed.ParseQueueRecords(res.Body)
		res.Body.Close()
		if err != nil || len(recs) != i+1 || recs[i].UserDeadline.UnixNano() != 1e9 {
			t.Errorf("%s: backend records %+v (%v), want %d, the last with the user's deadline", mode, recs, err, i+1)
		}
	}
}
