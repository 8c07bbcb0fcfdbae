// SPDX-License-Identifier: Apache-2.0

//go:build linux

package monitor

import (
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sockets is a SocketSet of fixed connections.
type sockets []syscall.RawConn

func (s sockets) AppendSockets(dst []syscall.RawConn) []syscall.RawConn { return append(dst, s...) }

// hangGuard bounds waits for the kernel to reach a state; it is a safety
// net against a hung test, not a timing assertion.
const hangGuard = 20 * time.Second

// waitFor polls cond until it holds or hangGuard passes.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached after %v (last: %s)", what, hangGuard, state)
		}
		time.Sleep(time.Millisecond)
	}
}

// tcpPair returns a connected loopback pair with small buffers: the
// server side's send buffer and the client side's receive buffer.
func tcpPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Timeout: hangGuard, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	cc, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client = cc.(*net.TCPConn)
	server, err = ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.SetWriteBuffer(8192); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return server, client
}

// socketQueue returns a SocketQueue of c alone in the given mode.
func socketQueue(t *testing.T, c syscall.Conn, mode QueueMode) *SocketQueue {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewSocketQueue(sockets{raw}, mode)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestSocketQueueOnLoopback(t *testing.T) {
	for _, mode := range []QueueMode{QueueUnsent, QueueUnacked} {
		t.Run(string(mode), func(t *testing.T) {
			server, client := tcpPair(t)
			q := socketQueue(t, server, mode)
			if n, err := q.QueuedBytes(); err != nil || n != 0 {
				t.Fatalf("idle connection: QueuedBytes = %d, %v; want 0", n, err)
			}

			// The server writes a large response; the client does not read,
			// so its window closes and the rest stays in the server's socket.
			const size = 1 << 20
			var wg sync.WaitGroup
			wg.Add(1)
			var werr error
			go func() {
				defer wg.Done()
				_, werr = io.Copy(server, strings.NewReader(strings.Repeat("x", size)))
			}()
			var queued int64
			waitFor(t, "a non-zero queue", func() (bool, string) {
				n, err := q.QueuedBytes()
				if err != nil {
					t.Fatal(err)
				}
				queued = n
				return n > 0, "0 bytes"
			})
			t.Logf("%s: %d bytes queued while the client does not read", mode, queued)

			// The averaging sensor sees the same queue.
			oq, err := NewOutQueue(queueConfig(8192), q, qt0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				if err := oq.Sample(qt0.Add(time.Duration(i) * 100 * time.Millisecond)); err != nil {
					t.Fatal(err)
				}
			}
			r, err := oq.Collect(qt0.Add(time.Second))
			if err != nil || r.Samples != 10 || r.Queue <= 0 {
				t.Errorf("OutQueue.Collect = %+v, %v; want 10 samples and a positive queue", r, err)
			}

			// The client drains everything; the queue empties.
			if err := client.SetReadDeadline(time.Now().Add(hangGuard)); err != nil {
				t.Fatal(err)
			}
			if n, err := io.CopyN(io.Discard, client, size); err != nil || n != size {
				t.Fatalf("client read %d bytes, %v; want %d", n, err, size)
			}
			wg.Wait()
			if werr != nil {
				t.Fatalf("server write: %v", werr)
			}
			waitFor(t, "an empty queue", func() (bool, string) {
				n, err := q.QueuedBytes()
				if err != nil {
					t.Fatal(err)
				}
				return n == 0, "non-zero"
			})

			// A closed socket is skipped, not an error and not a stale read.
			server.Close()
			if n, err := q.QueuedBytes(); err != nil || n != 0 {
				t.Errorf("closed socket: QueuedBytes = %d, %v; want 0, nil", n, err)
			}
		})
	}
}

func TestSocketQueueErrors(t *testing.T) {
	if _, err := NewSocketQueue(nil, QueueUnsent); err == nil {
		t.Error("NewSocketQueue(nil): no error")
	}
	_, err := NewSocketQueue(sockets{}, "bogus")
	wantErr(t, "NewSocketQueue(bogus)", err, "outgoing queue sensor", `"bogus"`)
	_, err = NewSocketOutQueue(DefaultOutQueueConfig(), sockets{}, qt0)
	wantErr(t, "NewSocketOutQueue without capacity", err, "capacity_bytes")

	// A UDP socket has no SIOCOUTQNSD: the error names the ioctl.
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	q := socketQueue(t, uc, QueueUnsent)
	_, err = q.QueuedBytes()
	wantErr(t, "QueuedBytes on UDP", err, "SIOCOUTQNSD")
	if d := q.Describe(); d != "unsent bytes (SIOCOUTQNSD) of client sockets" {
		t.Errorf("Describe = %q", d)
	}
}
