// SPDX-License-Identifier: Apache-2.0

//go:build linux

package policer

// The rejection-cost benchmark (Voigt & Gunningberg's early discard): how many connections per second
// the policer can reset, and at what server CPU cost, against a plain
// net/http server that answers every request with 503 + Retry-After after
// parsing it.
//
// The server runs in a child process (this test binary re-executed with
// rejectServerEnv set), so that its CPU time, read with getrusage in the
// child, excludes the load-generating client. Client and server talk over
// 127.0.0.1; every client connection is closed with SO_LINGER 0 (or reset
// by the server), so neither side accumulates TIME_WAIT sockets and the
// ephemeral ports are reused at once.
//
// On a host with two or more CPUs the server is pinned to the last CPU and
// the client to the others while a benchmark runs. On loopback the kernel
// processes a packet's reception on the CPU that sent it, so pinning
// charges each side for the packets it sends (the server for its RST, or
// for its response and FIN) instead of a random share of the other side's.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	rejectServerEnv = "SLUICE_POLICER_REJECT_SERVER"
	rejectCPUEnv    = "SLUICE_POLICER_REJECT_CPU" // the CPU the child pins itself to
)

// Rejection modes.
const (
	modeReset = "reset" // the policer: accept, SO_LINGER 0, close
	mode503   = "503"   // net/http: parse the request, answer 503 + Retry-After
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(rejectServerEnv); mode != "" {
		os.Exit(runRejectServer(mode, os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// runRejectServer is the child process: it serves on 127.0.0.1, prints
// "addr <host:port>", then answers each "usage" line on in with
// "usage <user CPU ns> <system CPU ns> <handler calls>" until in is closed.
func runRejectServer(mode string, in io.Reader, out io.Writer) int {
	if v := os.Getenv(rejectCPUEnv); v != "" {
		var cpu int
		var set unix.CPUSet
		if _, err := fmt.Sscan(v, &cpu); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		set.Set(cpu)
		if err := pinThreads(&set); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	var serveLn net.Listener = ln
	switch mode {
	case modeReset:
		p, err := New(Config{Rate: 0, Burst: 1}, time.Now())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		p.Admit(time.Now(), netip.Addr{}) // spend the only token: reject everything
		serveLn = p.Wrap(ln, nil)
	case mode503:
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", mode)
		return 2
	}
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(serveLn)
	fmt.Fprintln(out, "addr", ln.Addr())
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if sc.Text() != "usage" {
			continue
		}
		user, sys := cpuTimes()
		fmt.Fprintln(out, "usage", user, sys, calls.Load())
	}
	srv.Close()
	return 0
}

// cpuTimes returns the user and system CPU time of this process in
// nanoseconds (-1, -1 if unavailable).
func cpuTimes() (user, sys int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1, -1
	}
	return ru.Utime.Nano(), ru.Stime.Nano()
}

// pinThreads sets the CPU affinity of every thread of this process to set.
// Threads created later inherit it from their creator. Two passes catch a
// thread created during the first.
func pinThreads(set *unix.CPUSet) error {
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, task := range tasks {
			var tid int
			if _, err := fmt.Sscan(task.Name(), &tid); err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("pin thread %d: %w", tid, err)
			}
		}
	}
	return nil
}

// pinSplit pins this process to all allowed CPUs but the last and returns
// the last, for the server, and a function restoring the affinity. With
// fewer than two CPUs it pins nothing and returns -1.
func pinSplit(tb testing.TB) (serverCPU int, restore func()) {
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil || orig.Count() < 2 {
		return -1, func() {}
	}
	client := orig
	for cpu := 1023; cpu >= 0; cpu-- {
		if orig.IsSet(cpu) {
			serverCPU = cpu
			break
		}
	}
	client.Clear(serverCPU)
	if err := pinThreads(&client); err != nil {
		tb.Fatal(err)
	}
	return serverCPU, func() {
		if err := pinThreads(&orig); err != nil {
			tb.Error(err)
		}
	}
}

// rejectServer is a running child server.
type rejectServer struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	addr string
	mode string
}

// startRejectServer starts a child server for mode, pinned to cpu unless
// cpu < 0.
func startRejectServer(tb testing.TB, mode string, cpu int) *rejectServer {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), rejectServerEnv+"="+mode)
	if cpu >= 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", rejectCPUEnv, cpu))
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	s := &rejectServer{cmd: cmd, in: in, out: bufio.NewScanner(outPipe), mode: mode}
	tb.Cleanup(func() {
		s.in.Close()
		if err := s.cmd.Wait(); err != nil {
			tb.Errorf("reject server (%s): %v", mode, err)
		}
	})
	var addr string
	if !s.out.Scan() {
		tb.Fatalf("reject server (%s) printed no address: %v", mode, s.out.Err())
	}
	if _, err := fmt.Sscanf(s.out.Text(), "addr %s", &addr); err != nil {
		tb.Fatalf("reject server (%s): bad first line %q", mode, s.out.Text())
	}
	s.addr = addr
	return s
}

// usage returns the child's user and system CPU time and handler calls so
// far.
func (s *rejectServer) usage(tb testing.TB) (user, sys time.Duration, calls int64) {
	tb.Helper()
	if _, err := io.WriteString(s.in, "usage\n"); err != nil {
		tb.Fatal(err)
	}
	if !s.out.Scan() {
		tb.Fatalf("reject server: no usage line: %v", s.out.Err())
	}
	var u, k int64
	if _, err := fmt.Sscanf(s.out.Text(), "usage %d %d %d", &u, &k, &calls); err != nil || u < 0 || k < 0 {
		tb.Fatalf("reject server: bad usage line %q (%v)", s.out.Text(), err)
	}
	return time.Duration(u), time.Duration(k), calls
}

var request503 = []byte("GET /cgi-bin/search?q=sluice HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: sluice-bench\r\nAccept: */*\r\nConnection: close\r\n\r\n")

// reject makes one client connection and checks that it was rejected the
// way mode says: a reset with no byte received, or a complete 503 response.
func (s *rejectServer) reject(buf []byte) error {
	c, err := net.DialTimeout("tcp", s.addr, 10*time.Second)
	if err != nil {
		if s.mode == modeReset && errors.Is(err, syscall.ECONNRESET) {
			return nil // the reset arrived before connect(2) reported success
		}
		return err
	}
	tc := c.(*net.TCPConn)
	defer tc.Close()
	if err := tc.SetLinger(0); err != nil {
		return err
	}
	if err := tc.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	_, werr := tc.Write(request503)
	switch s.mode {
	case modeReset:
		n, rerr := tc.Read(buf)
		if n != 0 {
			return fmt.Errorf("rejected connection delivered %d bytes %q", n, buf[:n])
		}
		if errors.Is(rerr, syscall.ECONNRESET) || errors.Is(werr, syscall.ECONNRESET) || errors.Is(werr, syscall.EPIPE) {
			return nil
		}
		return fmt.Errorf("want a reset; write: %v, read: %v", werr, rerr)
	default:
		if werr != nil {
			return werr
		}
		var got []byte
		for {
			n, err := tc.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 503 ")) || !bytes.Contains(got, []byte("Retry-After: 1")) {
			return fmt.Errorf("want a 503 with Retry-After, got %q", got)
		}
		return nil
	}
}

// rejectMany makes n rejections with `workers` concurrent clients.
func (s *rejectServer) rejectMany(n, workers int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for next.Add(1) <= int64(n) {
				if err := s.reject(buf); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestRejectionHarness checks the benchmark's harness on a few connections
// of each kind: resets carry no byte and never reach the handler; 503s are
// complete responses from the handler.
func TestRejectionHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	for _, mode := range []string{modeReset, mode503} {
		t.Run(mode, func(t *testing.T) {
			s := startRejectServer(t, mode, -1)
			const n = 50
			if err := s.rejectMany(n, 4); err != nil {
				t.Fatal(err)
			}
			_, _, calls := s.usage(t)
			want := int64(0)
			if mode == mode503 {
				want = n
			}
			if calls != want {
				t.Errorf("handler calls = %d after %d rejections, want %d", calls, n, want)
			}
		})
	}
}

// Run with: go test -run '^$' -bench 'Reject' -benchtime 20000x ./policer/
//
// Metrics: rejections/s (wall clock, client and server on the same host),
// server-cpu-us/rejection (the server process's user+system CPU per
// rejection), server-sys-us/rejection (its system part) and
// client-cpu-us/rejection (the load generator's, for context). The ratio of
// the two server-cpu-us/rejection values is the cost advantage of early
// discard.
func BenchmarkRejectEarlyDiscard(b *testing.B) { benchRejection(b, modeReset) }

func BenchmarkReject503(b *testing.B) { benchRejection(b, mode503) }

func benchRejection(b *testing.B, mode string) {
	const workers = 4
	serverCPU, restore := pinSplit(b)
	defer restore()
	s := startRejectServer(b, mode, serverCPU)
	if err := s.rejectMany(200, workers); err != nil { // warm up
		b.Fatal(err)
	}
	user0, sys0, calls0 := s.usage(b)
	selfUser0, selfSys0 := cpuTimes()
	start := time.Now()
	b.ResetTimer()
	err := s.rejectMany(b.N, workers)
	b.StopTimer()
	wall := time.Since(start)
	selfUser1, selfSys1 := cpuTimes()
	user1, sys1, calls1 := s.usage(b)
	if err != nil {
		b.Fatal(err)
	}
	wantCalls := int64(0)
	if mode == mode503 {
		wantCalls = int64(b.N)
	}
	if calls1-calls0 != wantCalls {
		b.Fatalf("handler calls = %d for %d rejections, want %d", calls1-calls0, b.N, wantCalls)
	}
	n := float64(b.N)
	us := func(d time.Duration) float64 { return float64(d) / 1e3 / n }
	b.ReportMetric(n/wall.Seconds(), "rejections/s")
	b.ReportMetric(us(user1-user0+sys1-sys0), "server-cpu-us/rejection")
	b.ReportMetric(us(sys1-sys0), "server-sys-us/rejection")
	b.ReportMetric(us(time.Duration(selfUser1-selfUser0+selfSys1-selfSys0)), "client-cpu-us/rejection")
}
