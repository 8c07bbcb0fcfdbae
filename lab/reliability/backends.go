// SPDX-License-Identifier: Apache-2.0

package reliability

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is how a FaultBackend misbehaves.
type Fault string

// Faults of a FaultBackend.
const (
	FaultNone        Fault = "none"         // a proper 200 "ok\n"
	FaultReset       Fault = "reset"        // reads the request, then resets the connection (RST)
	FaultClose       Fault = "close"        // reads the request, then closes without answering
	FaultGarbage     Fault = "garbage"      // answers bytes that are not HTTP, then closes
	FaultHang        Fault = "hang"         // reads the request and never answers
	FaultDrip        Fault = "drip"         // a 10-byte body, one byte per Drip
	FaultSlowHeaders Fault = "slow-headers" // waits Delay before the response headers
	FaultMidBodyRST  Fault = "mid-body-rst" // headers and half the body, then a reset
)

// GarbageSecret is in every garbage answer; a proxy must not echo it.
const GarbageSecret = "SECRET-BACKEND-BYTES"

// FaultBackend is an HTTP/1.1 server on 127.0.0.1 written on raw
// sockets, so that it can misbehave in ways net/http never would.
type FaultBackend struct {
	URL   string
	ln    net.Listener
	fault atomic.Value // Fault
	drip  atomic.Int64 // ns between body bytes of FaultDrip
	delay atomic.Int64 // ns before the headers of FaultSlowHeaders

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	served atomic.Int64
}

// NewFaultBackend starts a FaultBackend answering properly.
func NewFaultBackend() (*FaultBackend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &FaultBackend{URL: "http://" + ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	b.fault.Store(FaultNone)
	b.SetDrip(100 * time.Millisecond)
	b.SetDelay(200 * time.Millisecond)
	b.wg.Go(b.accept)
	return b, nil
}

// Set changes the fault for requests from now on.
func (b *FaultBackend) Set(f Fault) { b.fault.Store(f) }

// SetDrip sets the gap between the body bytes of FaultDrip (default 100ms).
func (b *FaultBackend) SetDrip(d time.Duration) { b.drip.Store(int64(d)) }

// SetDelay sets the wait before the headers of FaultSlowHeaders (default
// 200ms).
func (b *FaultBackend) SetDelay(d time.Duration) { b.delay.Store(int64(d)) }

// Served returns the number of requests answered properly so far.
func (b *FaultBackend) Served() int64 { return b.served.Load() }

func (b *FaultBackend) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			c.Close()
			return
		}
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Go(func() {
			b.serve(c)
			b.mu.Lock()
			delete(b.conns, c)
			b.mu.Unlock()
			c.Close()
		})
	}
}

func (b *FaultBackend) serve(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		switch b.fault.Load().(Fault) {
		case FaultReset:
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			return
		case FaultClose:
			return
		case FaultGarbage:
			_, _ = io.WriteString(c, GarbageSecret+" \x00\x01\x02 this is not HTTP\r\n\r\n")
			return
		case FaultHang:
			_, _ = io.Copy(io.Discard, c) // until the proxy or Close ends it
			return
		case FaultDrip:
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"); err != nil {
				return
			}
			for range 10 {
				time.Sleep(time.Duration(b.drip.Load()))
				if _, err := c.Write([]byte("d")); err != nil {
					return
				}
			}
		case FaultSlowHeaders:
			time.Sleep(time.Duration(b.delay.Load()))
			if !b.ok(c) {
				return
			}
		case FaultMidBodyRST:
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf!")
			time.Sleep(50 * time.Millisecond)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			return
		default:
			if !b.ok(c) {
				return
			}
		}
	}
}

func (b *FaultBackend) ok(c net.Conn) bool {
	_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nok\n")
	if err == nil {
		b.served.Add(1)
	}
	return err == nil
}

// Close stops the backend and ends every connection.
func (b *FaultBackend) Close() error {
	err := b.ln.Close()
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

// CapacityBackend is a net/http backend with a fixed number of workers
// and a fixed service time, answering 200 "ok" (its capacity is
// workers/service requests per second; excess requests wait for a
// worker), that can be stalled: while stalled, requests are held until
// the stall ends, as in a garbage-collection pause or a lock convoy.
type CapacityBackend struct {
	URL     string
	srv     *http.Server
	workers chan struct{}
	service time.Duration

	mu      sync.Mutex
	stalled chan struct{} // closed when the stall ends; nil when not stalled
}

// NewCapacityBackend starts a CapacityBackend on 127.0.0.1.
func NewCapacityBackend(workers int, service time.Duration) (*CapacityBackend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &CapacityBackend{URL: "http://" + ln.Addr().String(), workers: make(chan struct{}, workers), service: service}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

func (b *CapacityBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	st := b.stalled
	b.mu.Unlock()
	if st != nil {
		select {
		case <-st:
		case <-r.Context().Done():
			return
		}
	}
	select {
	case b.workers <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	time.Sleep(b.service)
	<-b.workers
	if n, err := strconv.Atoi(r.URL.Query().Get("size")); err == nil && n > 0 {
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = io.WriteString(w, strings.Repeat("s", n))
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

// Stall holds every request from now until Resume.
func (b *CapacityBackend) Stall() {
	b.mu.Lock()
	if b.stalled == nil {
		b.stalled = make(chan struct{})
	}
	b.mu.Unlock()
}

// Resume ends a stall.
func (b *CapacityBackend) Resume() {
	b.mu.Lock()
	if b.stalled != nil {
		close(b.stalled)
		b.stalled = nil
	}
	b.mu.Unlock()
}

// Close stops the backend.
func (b *CapacityBackend) Close() error {
	b.Resume()
	return b.srv.Close()
}

// String describes the backend.
func (b *CapacityBackend) String() string {
	return fmt.Sprintf("%d workers × %v (%.0f req/s)", cap(b.workers), b.service, float64(cap(b.workers))/b.service.Seconds())
}

// LargeBackend is a net/http backend with a fixed number of workers that
// answers every request with Size bytes (and a Content-Length) after a
// fixed service time, holding its worker until the last byte is written:
// a worker is busy for the service time plus the time its answer takes to
// leave, as in a thread-per-request server whose writes block. It records
// how long each worker was held.
type LargeBackend struct {
	URL     string
	Size    int
	srv     *http.Server
	workers chan struct{}
	service time.Duration
	body    []byte

	mu    sync.Mutex
	holds []time.Duration // per answered request, since the last call of Holds
}

// NewLargeBackend starts a LargeBackend on 127.0.0.1.
func NewLargeBackend(workers int, service time.Duration, size int) (*LargeBackend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &LargeBackend{URL: "http://" + ln.Addr().String(), Size: size, workers: make(chan struct{}, workers), service: service,
		body: []byte(strings.Repeat("0123456789abcdef", (size+15)/16)[:size])}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

func (b *LargeBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case b.workers <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	start := time.Now()
	defer func() {
		<-b.workers
		b.mu.Lock()
		b.holds = append(b.holds, time.Since(start))
		b.mu.Unlock()
	}()
	time.Sleep(b.service)
	w.Header().Set("Content-Length", strconv.Itoa(len(b.body)))
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b.body)
}

// Busy returns the number of workers held now.
func (b *LargeBackend) Busy() int { return len(b.workers) }

// Holds returns how long each request answered since the last Reset held
// its worker, and forgets them.
func (b *LargeBackend) Holds() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.holds
	b.holds = nil
	return h
}

// Close stops the backend.
func (b *LargeBackend) Close() error { return b.srv.Close() }
