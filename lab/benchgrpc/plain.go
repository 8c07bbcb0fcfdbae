// SPDX-License-Identifier: Apache-2.0

package benchgrpc

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"golang.org/x/net/http2"
)

// NewPlainH2C returns the baseline of the comparison: a plain
// net/http/httputil.ReverseProxy that speaks HTTP/2 with prior knowledge
// (h2c) on both sides and nothing else — no admission control, no
// limits, no metrics. Its client side is net/http's server with
// Protocols.UnencryptedHTTP2 (Go 1.24+); its upstream side is
// golang.org/x/net/http2's Transport with AllowHTTP and a DialTLSContext
// that dials plain TCP, the documented way to speak h2c upstream.
// ReverseProxy flushes a response without a Content-Length (every gRPC
// answer) at each write, and copies the trailers.
func NewPlainH2C(listen, backend string) (*http.Server, error) {
	u, err := url.Parse(backend)
	if err != nil {
		return nil, err
	}
	// x/net's Transport is deprecated for http.Transport with Protocols
	// (what sluice uses); the baseline keeps it because it is the stricter
	// one: without http.Transport's layer above the HTTP/2 client it costs
	// less per call (docs/profiling.md).
	//lint:ignore SA1019 the baseline is x/net's HTTP/2 client called directly, on purpose
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: dialPlain}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) }, Transport: tr}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{Addr: listen, Handler: rp, Protocols: &p, ReadHeaderTimeout: 10 * time.Second}, nil
}

// dialPlain dials TCP where x/net's Transport would dial TLS: h2c.
func dialPlain(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}
