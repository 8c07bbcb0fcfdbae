// SPDX-License-Identifier: Apache-2.0

//go:build linux

package policer

import (
	"io"
	"math"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/monitor"
)

var (
	_ monitor.SocketSet   = (*Registry)(nil)
	_ monitor.ByteCounter = (*Registry)(nil)
)

// TestRegistryFeedsSensors runs the outgoing-queue and bandwidth sensors
// on a Registry: a client that does not read leaves a non-zero queue in the
// server socket; after it drains, the queue is empty and every byte was
// counted.
func TestRegistryFeedsSensors(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var reg Registry
	ln := mustNew(t, Config{Rate: math.Inf(1), Burst: 1}).Wrap(inner, &reg)
	defer ln.Close()

	d := net.Dialer{Timeout: hangGuard, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
			return err
		}
		return serr
	}}
	cc, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	server := sc.(*Conn)
	defer server.Close()
	if err := server.SetWriteBuffer(8192); err != nil {
		t.Fatal(err)
	}

	q, err := monitor.NewSocketQueue(&reg, monitor.QueueUnsent)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	bw, err := monitor.NewBandwidth(&reg, 1e6, start)
	if err != nil {
		t.Fatal(err)
	}

	const size = 1 << 20
	done := make(chan error, 1)
	go func() {
		_, err := io.WriteString(server, strings.Repeat("y", size))
		done <- err
	}()
	deadline := time.Now().Add(hangGuard)
	for {
		n, err := q.QueuedBytes()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no queue built up while the client did not read")
		}
		time.Sleep(time.Millisecond)
	}
	cc.SetReadDeadline(time.Now().Add(hangGuard))
	if n, err := io.CopyN(io.Discard, cc, size); n != size || err != nil {
		t.Fatalf("client read %d, %v", n, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for {
		n, err := q.QueuedBytes()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue still %d bytes after the client drained it", n)
		}
		time.Sleep(time.Millisecond)
	}
	r, err := bw.Measure(start.Add(time.Second))
	if err != nil || r.Bytes != size || r.Utilization != float64(size)/1e6 {
		t.Errorf("bandwidth = %+v, %v; want %d bytes over 1s", r, err, size)
	}
}
