// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// newServerTLS loads the files of c, the TLS setting at path p, and
// returns the watch that serves them.
func newServerTLS(p string, c *TLSConfig, now time.Time) (*tlsWatch, error) {
	conf, sum, err := loadServerTLS(p, c)
	if err != nil {
		return nil, err
	}
	cc := *c
	files := cc.files(p)
	build := func(data [][]byte) (*tls.Config, error) { return buildServerTLS(&cc, files, data) }
	return newTLSWatch(p, files, watchOf(c.Watch), conf, sum, build, now), nil
}

// newServerTLS is newServerTLS reporting to s's log and metrics.
func (s *Server) newServerTLS(p string, c *TLSConfig) (*tlsWatch, error) {
	w, err := newServerTLS(p, c, time.Now())
	if err != nil {
		return nil, err
	}
	w.setOutputs(s.log, s.tlsm)
	return w, nil
}

// recheckTLS reads the TLS files of the listeners, and of g's pool when
// the reload kept it, at now: a reload with unchanged TLS settings
// applies new contents of their files at once. Called with s.mu held.
func (s *Server) recheckTLS(g *generation, poolKept bool, now time.Time) {
	for _, w := range s.tlsw {
		_, _ = w.Check(now)
	}
	if poolKept && g.pool.tls != nil {
		_, _ = g.pool.tls.w.Check(now)
	}
}

// serverConfig returns the tls.Config of w's listener: every handshake
// takes the configuration in service (GetConfigForClient), so that new
// files apply to the next handshake and to no open connection.
func (w *tlsWatch) serverConfig() *tls.Config {
	conf := w.config()
	return &tls.Config{MinVersion: conf.MinVersion, NextProtos: conf.NextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return w.cur.Load(), nil }}
}

// upstreamTLS is the proxy's TLS towards https:// servers
// (backends.tls): the watch of its files, and the dialer that the
// pool's standard transport uses for every https connection
// (http.Transport.DialTLSContext), so that each new connection takes the
// CA bundle and client certificate in service. HTTP/2 is negotiated by
// ALPN as without it.
type upstreamTLS struct {
	w       *tlsWatch
	dialer  *net.Dialer
	timeout time.Duration // the TLS handshake's bound
}

// newUpstreamTLS loads the files of c (backends.tls); dial bounds the
// TCP connect and, separately, the handshake.
func newUpstreamTLS(c *UpstreamTLSConfig, dial time.Duration, now time.Time) (*upstreamTLS, error) {
	const p = "backends.tls"
	conf, sum, err := loadUpstreamTLS(p, c)
	if err != nil {
		return nil, err
	}
	cc := *c
	files := cc.files(p)
	build := func(data [][]byte) (*tls.Config, error) { return buildUpstreamTLS(&cc, files, data) }
	return &upstreamTLS{w: newTLSWatch(p, files, watchOf(c.Watch), conf, sum, build, now),
		dialer: &net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}, timeout: dial}, nil
}

// dialTLS connects to addr and completes a TLS handshake with the
// configuration in service, sending as SNI and verifying server_name or
// else addr's host. A handshake error says "TLS handshake", which the
// proxy's error classification reads (upstream_error.go).
func (u *upstreamTLS) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	raw, err := u.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	conf := u.w.config()
	if conf.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		conf = conf.Clone()
		conf.ServerName = host
	}
	tc := tls.Client(raw, conf)
	hctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}
