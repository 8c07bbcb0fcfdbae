// SPDX-License-Identifier: Apache-2.0

package tlsconf

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// NewServerWatch loads the files of c, the TLS setting of a listener at
// path p ("listeners[0].tls", "admin.tls"), at now, and returns the
// watch that serves them. c must have its defaults (SetDefaults).
func NewServerWatch(p string, c *Config, now time.Time) (*Watch, error) {
	files, build := serverBuild(p, c)
	conf, sum, err := loadTLS(files, build)
	if err != nil {
		return nil, err
	}
	return newWatch(p, files, watchOf(c.Watch), conf, sum, build, now), nil
}

// ServerConfig returns the tls.Config of w's listener: every handshake
// takes the configuration in service (GetConfigForClient), so that new
// files apply to the next handshake and to no open connection.
func (w *Watch) ServerConfig() *tls.Config {
	conf := w.Config()
	return &tls.Config{MinVersion: conf.MinVersion, NextProtos: conf.NextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return w.cur.Load(), nil }}
}

// Upstream is the proxy's TLS towards https:// servers
// (backends.tls): the watch of its files, and the dialer that the
// pool's standard transport uses for every https connection
// (http.Transport.DialTLSContext), so that each new connection takes the
// CA bundle and client certificate in service. HTTP/2 is negotiated by
// ALPN as without it.
type Upstream struct {
	w       *Watch
	dialer  *net.Dialer
	timeout time.Duration // the TLS handshake's bound
}

// NewUpstream loads the files of c (backends.tls) at now; dial bounds
// the TCP connect and, separately, the handshake. c must have its
// defaults (SetDefaults).
func NewUpstream(c *UpstreamConfig, dial time.Duration, now time.Time) (*Upstream, error) {
	const p = "backends.tls"
	files, build := upstreamBuild(p, c)
	conf, sum, err := loadTLS(files, build)
	if err != nil {
		return nil, err
	}
	return &Upstream{w: newWatch(p, files, watchOf(c.Watch), conf, sum, build, now),
		dialer: &net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}, timeout: dial}, nil
}

// Watch returns the watch of u's files.
func (u *Upstream) Watch() *Watch { return u.w }

// DialTLS connects to addr and completes a TLS handshake with the
// configuration in service, sending as SNI and verifying server_name or
// else addr's host. A handshake error says "TLS handshake", which the
// proxy's error classification reads.
func (u *Upstream) DialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	raw, err := u.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	conf := u.w.Config()
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
