// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The discard-cost experiment (early discard, Voigt & Gunningberg): the CPU a sluice
// process and the kernel spend per refused connection attempt, for the
// three ways sluice refuses one:
//
//   - DiscardKernel: the connection policer's kernel path (policer.kernel:
//     on, rate ≈ 0): nftables drops the SYN at prerouting; no handshake,
//     nothing reaches sluice.
//   - DiscardReset: the user-space policer (policer.kernel: off): the
//     kernel completes the handshake, sluice accepts, sets SO_LINGER 0 and
//     closes (the client sees ECONNRESET).
//   - Discard503: no policer; a static-rate stage of rate ≈ 0 answers
//     every request 503 + Retry-After after reading and parsing it.
//
// Cost per attempt = (Δ sluice utime+stime, /proc/PID/stat) + (Δ softirq
// time of every CPU, /proc/stat), over the attempts made. The softirq
// column is host-wide: it includes other processes' network work (the
// experiment measures the same column for as long with no load, first,
// and subtracts that baseline) and, on loopback, the client side's
// receive processing (the SYN-ACK, the RST, the 503 response), which a
// server across a network would not pay; Result keeps both parts apart.

// Discard modes.
const (
	DiscardKernel = "kernel"
	DiscardReset  = "reset"
	Discard503    = "503"
)

// DiscardConfig is the sluice configuration of a mode (ADDR, ADMIN and
// BACKEND replaced by StartSluice). Rate 0.001 with a bucket of 1: the
// readiness probe's connection takes the only token, every later attempt
// is refused; the 503 stage's bucket is spent by MeasureDiscard's warm-up.
func DiscardConfig(mode string) (string, error) {
	base := "listeners:\n  - addr: ADDR\nadmin:\n  addr: ADMIN\nbackends:\n  servers:\n    - url: BACKEND\n"
	switch mode {
	case DiscardKernel:
		return base + "policer: {rate: 0.001, burst: 1, controller: none, kernel: on}\n", nil
	case DiscardReset:
		return base + "policer: {rate: 0.001, burst: 1, controller: none, kernel: off}\n", nil
	case Discard503:
		return base + "stages:\n  - {name: all, match: {path_prefix: /}, controller: static-rate, params: {rate: 0.001}}\n", nil
	}
	return "", fmt.Errorf("unknown discard mode %q", mode)
}

// DiscardResult is one mode's measurement.
type DiscardResult struct {
	Mode     string        `json:"mode"`
	Attempts int64         `json:"attempts"`
	Errors   int64         `json:"errors"` // attempts not refused the mode's way
	Wall     time.Duration `json:"wall_ns"`
	// ProcCPU is the sluice process's user+system CPU over the load;
	// SoftIRQ the host's softirq time over the load minus Baseline, the
	// softirq time of as long an interval with no load just before.
	ProcCPU  time.Duration `json:"proc_cpu_ns"`
	SoftIRQ  time.Duration `json:"softirq_ns"`
	Baseline time.Duration `json:"softirq_baseline_ns"`
	// ClientCPU is the load generator's CPU (this process), for context.
	ClientCPU time.Duration `json:"client_cpu_ns"`
	// Load1 is the one-minute load average at the start.
	Load1 float64 `json:"load1"`
}

// PerAttempt returns the sluice process's, the softirq's and their total
// CPU per attempt in microseconds.
func (r DiscardResult) PerAttempt() (proc, softirq, total float64) {
	if r.Attempts == 0 {
		return 0, 0, 0
	}
	n := float64(r.Attempts)
	proc = float64(r.ProcCPU) / 1e3 / n
	softirq = max(float64(r.SoftIRQ), 0) / 1e3 / n
	return proc, softirq, proc + softirq
}

// clkTck is USER_HZ, the unit of /proc/stat and /proc/PID/stat times
// (100 on every Linux architecture Go supports).
const clkTck = 100

// procCPU returns utime+stime of pid from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bad /proc/PID/stat")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3; utime 14, stime 15
	if len(f) < 13 {
		return 0, errors.New("short /proc/PID/stat")
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	k, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad utime/stime")
	}
	return time.Duration(u+k) * time.Second / clkTck, nil
}

// softirqTime returns the softirq time summed over all CPUs (/proc/stat,
// the "cpu" line's 7th value).
func softirqTime() (time.Duration, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 7 && fs[0] == "cpu" {
			v, err := strconv.ParseUint(fs[7], 10, 64)
			if err != nil {
				return 0, err
			}
			return time.Duration(v) * time.Second / clkTck, nil
		}
	}
	return 0, errors.New("/proc/stat: no cpu line")
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// MeasureDiscard refuses connection attempts to the sluice process p
// (started with DiscardConfig(mode)) from `workers` goroutines for d,
// after a baseline interval of d with no load, and returns the costs.
func MeasureDiscard(ctx context.Context, p *Proc, mode string, d time.Duration, workers int) (DiscardResult, error) {
	r := DiscardResult{Mode: mode, Load1: load1()}
	ap, err := netip.ParseAddrPort(p.Addr)
	if err != nil {
		return r, err
	}
	if mode != DiscardKernel {
		// Warm up, and spend what the 503 stage's bucket admits.
		buf, req := make([]byte, 4096), []byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		refused := 0
		for i := 0; refused < 100; i++ {
			if i > 1000 {
				return r, fmt.Errorf("%s: fewer than 100 of 1000 warm-up attempts refused", mode)
			}
			if refusedOnce(mode, p.Addr, req, buf) {
				refused++
			}
		}
	}
	s0, err := softirqTime()
	if err != nil {
		return r, err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return r, ctx.Err()
	}
	s1, _ := softirqTime()
	r.Baseline = s1 - s0
	c0, err := procCPU(p.Pid())
	if err != nil {
		return r, err
	}
	self0 := selfCPU()
	start := time.Now()
	end := start.Add(d)
	var attempts, errs atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			a, e := attemptLoop(ctx, mode, ap, end)
			attempts.Add(a)
			errs.Add(e)
		})
	}
	wg.Wait()
	r.Wall = time.Since(start)
	s2, _ := softirqTime()
	c1, err := procCPU(p.Pid())
	if err != nil {
		return r, err
	}
	r.ClientCPU = selfCPU() - self0
	r.ProcCPU = c1 - c0
	r.SoftIRQ = (s2 - s1) - time.Duration(float64(r.Baseline)*float64(r.Wall)/float64(d))
	r.Attempts, r.Errors = attempts.Load(), errs.Load()
	return r, nil
}

// attemptLoop makes refused attempts until end; it returns the attempts
// and those not refused the mode's way.
func attemptLoop(ctx context.Context, mode string, ap netip.AddrPort, end time.Time) (n, bad int64) {
	if mode == DiscardKernel {
		return synLoop(ctx, ap, end)
	}
	buf := make([]byte, 4096)
	req := []byte("GET /cgi-bin/search?q=sluice HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: sluice-discard\r\nConnection: close\r\n\r\n")
	for time.Now().Before(end) && ctx.Err() == nil {
		n++
		if !refusedOnce(mode, ap.String(), req, buf) {
			bad++
		}
	}
	return n, bad
}

// refusedOnce makes one connection and reports whether it was refused
// the mode's way: a reset with no byte, or a 503.
func refusedOnce(mode, addr string, req, buf []byte) bool {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return mode == DiscardReset && errors.Is(err, syscall.ECONNRESET)
	}
	tc := c.(*net.TCPConn)
	defer tc.Close()
	_ = tc.SetLinger(0)
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	_, werr := tc.Write(req)
	var got []byte
	for {
		k, err := tc.Read(buf)
		got = append(got, buf[:k]...)
		if err != nil {
			if mode == DiscardReset {
				return len(got) == 0 && (errors.Is(err, syscall.ECONNRESET) || errors.Is(werr, syscall.ECONNRESET) || errors.Is(werr, syscall.EPIPE))
			}
			return err == io.EOF && strings.HasPrefix(string(got), "HTTP/1.1 503 ")
		}
		if mode == Discard503 && strings.HasPrefix(string(got), "HTTP/1.1 503 ") && strings.Contains(string(got), "\r\n\r\n") {
			return true // the whole head; the body may follow
		}
	}
}

// synLoop sends SYNs: non-blocking connects, each socket closed 64
// attempts later (long before TCP's 1 s retransmission), and reports as
// bad those that connected (the kernel let the SYN through).
func synLoop(ctx context.Context, ap netip.AddrPort, end time.Time) (n, bad int64) {
	sa := &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	const ring = 64
	var fds [ring]int
	for i := range fds {
		fds[i] = -1
	}
	closeFD := func(fd int) {
		if fd < 0 {
			return
		}
		// A socket whose handshake completed means a SYN got through.
		if _, err := unix.Getpeername(fd); err == nil {
			bad++
		}
		unix.Close(fd)
	}
	for i := 0; time.Now().Before(end) && ctx.Err() == nil; i = (i + 1) % ring {
		closeFD(fds[i])
		fds[i] = -1
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			bad++
			continue
		}
		n++
		if err := unix.Connect(fd, sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
			bad++
			unix.Close(fd)
			continue
		}
		fds[i] = fd
	}
	for _, fd := range fds {
		closeFD(fd)
	}
	return n, bad
}
