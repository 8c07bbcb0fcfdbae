// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary a backend process serving 200 "ok" on
// the address it names (a real process that can be killed and stopped).
const childEnv = "SLUICE_RELIABILITY_CHILD"

func runChild(addr string) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	}), ReadHeaderTimeout: 10 * time.Second}
	_ = srv.Serve(ln)
	return 0
}

// startChild starts the backend process on addr and waits until it
// listens.
func startChild(t *testing.T, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
		t.Fatalf("backend process: %q %v", line, err)
	}
	return cmd
}

// faultConfig is sluice in front of url with short upstream timeouts.
func faultConfig(url string) string {
	return strings.ReplaceAll(`listeners: [{addr: 127.0.0.1:0}]
admin: {addr: 127.0.0.1:0}
backends:
  servers: [{url: BACKEND}]
  timeouts: {dial: 1s, response_header: 500ms, overall: 3s}
`, "BACKEND", url)
}

// idle waits until sluice has no request in flight and no pool slot
// taken.
func (s *sluice) idle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		st := s.srv.State(0)
		if st.InFlight == 0 && st.Backends.InFlight == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests still in flight: %d, pool %d", st.InFlight, st.Backends.InFlight)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBackendFaults: an admitted request always gets the backend's answer
// or an explicit 502/504 naming the cause; a response cut after its
// headers ends the client's connection (it is never passed off as
// complete); nothing is left in flight; service resumes when the fault
// ends.
func TestBackendFaults(t *testing.T) {
	fb, err := NewFaultBackend()
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	s := startSluice(t, faultConfig(fb.URL))
	c := httpClient(t)
	cases := []struct {
		fault  Fault
		setup  func()
		status int    // 0: the body must fail to read
		body   string // a substring of the answer
	}{
		{FaultReset, nil, 502, "closed the connection"},
		{FaultClose, nil, 502, "closed the connection"},
		{FaultGarbage, nil, 502, "invalid HTTP response"},
		{FaultHang, nil, 504, "no response headers"},
		{FaultDrip, func() { fb.SetDrip(50 * time.Millisecond) }, 200, "dddddddddd"},
		{FaultDrip, func() { fb.SetDrip(time.Second) }, 0, ""}, // 10 s > overall 3s
		{FaultSlowHeaders, func() { fb.SetDelay(100 * time.Millisecond) }, 200, "ok"},
		{FaultSlowHeaders, func() { fb.SetDelay(2 * time.Second) }, 504, "no response headers"},
		{FaultMidBodyRST, nil, 0, ""},
	}
	for _, tc := range cases {
		if tc.setup != nil {
			tc.setup()
		}
		fb.Set(tc.fault)
		code, body, err := fetch(t, c, "http://"+s.addr+"/f")
		switch {
		case tc.status == 0:
			if err == nil {
				t.Errorf("%s: a cut-off response read as complete: %d %q", tc.fault, code, body)
			}
		case err != nil || code != tc.status || !strings.Contains(body, tc.body):
			t.Errorf("%s: %d %q %v, want %d with %q", tc.fault, code, body, err, tc.status, tc.body)
		case code >= 500 && !strings.HasPrefix(body, "sluice: "):
			t.Errorf("%s: gateway error without the proxy's cause: %q", tc.fault, body)
		}
		if strings.Contains(body, GarbageSecret) {
			t.Errorf("%s: the backend's bytes reached the client: %q", tc.fault, body)
		}
		fb.Set(FaultNone)
		if code, body, err := fetch(t, c, "http://"+s.addr+"/after"); err != nil || code != 200 {
			t.Errorf("after %s: %d %q %v, want 200", tc.fault, code, body, err)
		}
		s.idle(t)
	}
}

// TestBackendKilledAndStalled runs the backend as its own process: killed
// (SIGKILL) it is answered 502 at once, stopped (SIGSTOP) 504 after
// response_header; restarted or continued, it is served again.
func TestBackendKilledAndStalled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	child := startChild(t, addr)
	s := startSluice(t, faultConfig("http://"+addr))
	c := httpClient(t)
	want := func(what string, status int, body string) {
		t.Helper()
		code, got, err := fetch(t, c, "http://"+s.addr+"/k")
		if err != nil || code != status || !strings.Contains(got, body) {
			t.Fatalf("%s: %d %q %v, want %d with %q", what, code, got, err, status, body)
		}
	}
	want("healthy", 200, "ok")

	must(t, child.Process.Signal(syscall.SIGSTOP))
	waitState(t, child.Process.Pid, true) // the signal is delivered asynchronously
	start := time.Now()
	want("stopped", 504, "no response headers")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a stopped backend took %v to be answered", d)
	}
	must(t, child.Process.Signal(syscall.SIGCONT))
	waitState(t, child.Process.Pid, false)
	want("continued", 200, "ok")

	must(t, child.Process.Kill())
	_ = child.Wait()
	c.Transport.(*http.Transport).CloseIdleConnections()
	want("killed", 502, "sluice: ")
	startChild(t, addr)
	want("restarted", 200, "ok")
	s.idle(t)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
}

// waitState waits until process pid is stopped (or running again).
func waitState(t *testing.T, pid int, stopped bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// The state follows the command name in parentheses.
		st := ""
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
			st = string(b[i+2])
		}
		if (st == "T") == stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d state %q, want stopped=%v", pid, st, stopped)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
