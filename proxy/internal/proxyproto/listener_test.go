// SPDX-License-Identifier: Apache-2.0

package proxyproto

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testcert"
	"github.com/sluicehq/sluice/proxy/internal/proxytest"
)

// testTimeout bounds every wait; it is reached only when something hangs.
const testTimeout = 20 * time.Second

// The trusted balancer is 127.0.0.1; clients that are not trusted
// connect from 127.0.0.2 (all of 127.0.0.0/8 is loopback).
const (
	balancer = "127.0.0.1"
	stranger = "127.0.0.2"
)

// server is an HTTP server behind a Listener that answers each request
// with its RemoteAddr and protocol, and records the refusals.
type server struct {
	addr     string
	ln       *Listener
	rejected chan Reason
}

func serve(t *testing.T, timeout time.Duration, wrap func(net.Listener) net.Listener, protos *http.Protocols) *server {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: inner.Addr().String(), rejected: make(chan Reason, 64)}
	trusted := netip.MustParsePrefix(balancer + "/32")
	s.ln = NewListener(inner, Options{Trusted: trusted.Contains, HeaderTimeout: timeout,
		Rejected: func(r Reason, peer net.Addr) {
			if !strings.HasPrefix(peer.String(), "127.") {
				t.Errorf("refusal reported for %v, not the socket's peer", peer)
			}
			s.rejected <- r
		}})
	var ln net.Listener = s.ln
	if wrap != nil {
		ln = wrap(ln)
	}
	srv := &http.Server{ReadHeaderTimeout: testTimeout, Protocols: protos,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Proto", r.Proto)
			_, _ = io.WriteString(w, r.RemoteAddr)
		})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// dial connects from the local address from.
func (s *server) dial(t *testing.T, from string) net.Conn {
	t.Helper()
	return proxytest.DialFrom(t, from, s.addr)
}

// exchange sends b, then a request, in one write, and returns the
// answer's body (the address the server saw), or the read error.
func (s *server) exchange(t *testing.T, from string, b []byte) (string, error) {
	t.Helper()
	c := s.dial(t, from)
	if _, err := c.Write(append(append([]byte(nil), b...), "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"...)); err != nil {
		return "", err
	}
	return readAnswer(c)
}

func readAnswer(c net.Conn) (string, error) {
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// closedWithout reports whether the server closed c without answering:
// the read ends in EOF or a reset, not in the test's own deadline.
func closedWithout(t *testing.T, c net.Conn) {
	t.Helper()
	n, err := c.Read(make([]byte, 512))
	var ne net.Error
	if n != 0 || err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("read %d bytes, %v; want the connection closed without an answer", n, err)
	}
}

func (s *server) wantRejected(t *testing.T, want Reason) {
	t.Helper()
	select {
	case got := <-s.rejected:
		if got != want {
			t.Fatalf("refused for %q, want %q", got, want)
		}
	case <-time.After(testTimeout):
		t.Fatalf("no refusal reported, want %q", want)
	}
}

func (s *server) wantNoRejection(t *testing.T) {
	t.Helper()
	select {
	case got := <-s.rejected:
		t.Fatalf("refused for %q", got)
	default:
	}
}

// A trusted source's header becomes RemoteAddr, in both versions and
// both families; a LOCAL or UNKNOWN header keeps the socket's address.
func TestTrustedHeaderSetsRemoteAddr(t *testing.T) {
	s := serve(t, testTimeout, nil, nil)
	for _, c := range []struct {
		name   string
		header []byte
		want   string
	}{
		{"v1 ipv4", []byte("PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\n"), "203.0.113.7:56324"},
		{"v1 ipv6", []byte("PROXY TCP6 2001:db8::7 2001:db8::1 56324 443\r\n"), "[2001:db8::7]:56324"},
		{"v2 ipv4", v2(cmdProxy, tcp4, block4("198.51.100.4", "192.0.2.1", 40000, 443), tlv(0x01, "http/1.1")), "198.51.100.4:40000"},
		{"v2 ipv6", v2(cmdProxy, tcp6, block6("2001:db8::9", "2001:db8::1", 40001, 443), nil), "[2001:db8::9]:40001"},
		{"v2 local", v2(cmdLocal, 0x00, nil, nil), balancer + ":"},
		{"v1 unknown", []byte("PROXY UNKNOWN\r\n"), balancer + ":"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.exchange(t, balancer, c.header)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want && !(strings.HasSuffix(c.want, ":") && strings.HasPrefix(got, c.want)) {
				t.Errorf("RemoteAddr %q, want %q", got, c.want)
			}
		})
	}
	s.wantNoRejection(t)
}

// A source that is not trusted is served with its socket's address, and
// closed if it starts with a signature, whatever follows.
func TestUntrustedSource(t *testing.T) {
	s := serve(t, testTimeout, nil, nil)
	got, err := s.exchange(t, stranger, nil)
	if err != nil || !strings.HasPrefix(got, stranger+":") {
		t.Fatalf("plain request from %s: %q, %v", stranger, got, err)
	}
	s.wantNoRejection(t)
	for _, h := range [][]byte{
		[]byte("PROXY TCP4 203.0.113.7 192.0.2.1 56324 443\r\n"),
		v2(cmdProxy, tcp4, block4("203.0.113.7", "192.0.2.1", 1, 2), nil),
		v2(cmdLocal, 0x00, nil, nil),
		[]byte("PROXY garbage\r\n"),
	} {
		c := s.dial(t, stranger)
		if _, err := c.Write(append(h, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"...)); err != nil {
			t.Fatal(err)
		}
		closedWithout(t, c)
		s.wantRejected(t, ReasonUntrusted)
	}
}

// From a trusted source the header is required; a malformed, truncated
// or oversized one closes the connection and is counted.
func TestTrustedSourceRefusals(t *testing.T) {
	s := serve(t, testTimeout, nil, nil)
	for _, c := range []struct {
		name   string
		send   []byte
		reason Reason
	}{
		{"no header", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ReasonMissing},
		{"v1 malformed", []byte("PROXY TCP4 203.0.113.7 192.0.2.1 080 443\r\nGET / HTTP/1.1\r\n\r\n"), ReasonMalformed},
		{"v1 oversized", []byte("PROXY TCP4 " + strings.Repeat("9", 200) + "\r\n"), ReasonMalformed},
		{"v2 oversized", v2(cmdProxy, tcp4, block4("1.2.3.4", "5.6.7.8", 1, 2), tlv(0xe0, strings.Repeat("x", 5000))), ReasonMalformed},
		{"v2 udp", v2(cmdProxy, udp4, block4("1.2.3.4", "5.6.7.8", 1, 2), nil), ReasonUnsupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := s.dial(t, balancer)
			if _, err := conn.Write(c.send); err != nil {
				t.Fatal(err)
			}
			closedWithout(t, conn)
			s.wantRejected(t, c.reason)
		})
	}
	t.Run("truncated", func(t *testing.T) {
		conn := s.dial(t, balancer)
		h := v2(cmdProxy, tcp6, block6("2001:db8::7", "::1", 1, 2), nil)
		if _, err := conn.Write(h[:len(h)-5]); err != nil {
			t.Fatal(err)
		}
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		closedWithout(t, conn)
		s.wantRejected(t, ReasonMalformed)
	})
	t.Run("closed before any byte", func(t *testing.T) {
		conn := s.dial(t, balancer)
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		closedWithout(t, conn)
		s.wantNoRejection(t)
	})
}

// A trusted source that sends nothing, or part of a header, is closed
// when the header timeout passes.
func TestHeaderTimeout(t *testing.T) {
	s := serve(t, 50*time.Millisecond, nil, nil)
	for _, send := range [][]byte{nil, sigV2[:6], v2(cmdProxy, tcp4, block4("1.2.3.4", "5.6.7.8", 1, 2), nil)[:20]} {
		c := s.dial(t, balancer)
		if _, err := c.Write(send); err != nil {
			t.Fatal(err)
		}
		closedWithout(t, c)
		s.wantRejected(t, ReasonTimeout)
	}
}

// Accept never waits for a header: a silent trusted connection does not
// hold up the next one.
func TestAcceptDoesNotWait(t *testing.T) {
	s := serve(t, testTimeout, nil, nil)
	_ = s.dial(t, balancer) // silent for the whole test
	got, err := s.exchange(t, balancer, []byte("PROXY TCP4 203.0.113.8 192.0.2.1 1000 443\r\n"))
	if err != nil || got != "203.0.113.8:1000" {
		t.Fatalf("second connection: %q, %v", got, err)
	}
}

// The owner's earlier read deadline bounds the wait for a header too.
func TestOwnerDeadlineBoundsHeader(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	ln := NewListener(inner, Options{Trusted: func(netip.Addr) bool { return true }, HeaderTimeout: testTimeout})
	cli, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	var pe *Error
	if !errors.As(err, &pe) || pe.Reason != ReasonTimeout {
		t.Fatalf("Read = %v, want a timeout refusal", err)
	}
}

// The header comes before the TLS handshake: a TLS listener over the
// Listener sees the believed address.
func TestBeforeTLS(t *testing.T) {
	cert, pool := localhostCert(t)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	s := serve(t, testTimeout, func(ln net.Listener) net.Listener { return tls.NewListener(ln, cfg) }, nil)
	for _, h2 := range []bool{false, true} {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}, ForceAttemptHTTP2: h2,
			DialContext: s.dialWithHeader(t, "PROXY TCP6 2001:db8::5 2001:db8::1 4444 443\r\n")}
		if !h2 {
			tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		}
		got, proto := get(t, tr, "https://"+s.addr+"/")
		if got != "[2001:db8::5]:4444" || (proto == "HTTP/2.0") != h2 {
			t.Errorf("h2 %v: RemoteAddr %q over %s", h2, got, proto)
		}
		tr.CloseIdleConnections()
	}
}

// With HTTP/2 over cleartext (prior knowledge, as gRPC clients use), the
// header precedes the connection preface.
func TestBeforeH2C(t *testing.T) {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	s := serve(t, testTimeout, nil, &p)
	var cp http.Protocols
	cp.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &cp, DialContext: s.dialWithHeader(t, string(v2(cmdProxy, tcp4, block4("203.0.113.9", "192.0.2.1", 5555, 80), nil)))}
	defer tr.CloseIdleConnections()
	got, proto := get(t, tr, "http://"+s.addr+"/")
	if got != "203.0.113.9:5555" || proto != "HTTP/2.0" {
		t.Errorf("RemoteAddr %q over %s", got, proto)
	}
}

// dialWithHeader dials from the balancer and sends header first.
func (s *server) dialWithHeader(t *testing.T, header string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(balancer)}}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if _, err := io.WriteString(c, header); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}

func get(t *testing.T, tr *http.Transport, url string) (body, proto string) {
	t.Helper()
	resp, err := (&http.Client{Transport: tr, Timeout: testTimeout}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp.Header.Get("X-Proto")
}

// localhostCert returns a certificate for 127.0.0.1, signed by a new test
// CA, and a pool that trusts the CA.
func localhostCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	ca := testcert.NewCA(t, "proxyproto test CA")
	return ca.Issue(t, testcert.Leaf{CommonName: "proxyproto test", IPs: []string{"127.0.0.1"}}).TLS(t), ca.Pool()
}
