// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/netprefix"
	"github.com/sluicehq/sluice/proxy/internal/proxyproto"
)

// DefaultProxyProtocolHeaderTimeout is ProxyProtocolConfig.HeaderTimeout's
// default (Caddy's proxy_protocol timeout; nginx and HAProxy bound the
// header with their client header timeout).
const DefaultProxyProtocolHeaderTimeout = 5 * time.Second

// ProxyProtocolConfig is the PROXY protocol (HAProxy's proxy-protocol.txt,
// version 1 and 2) on a listener: a load balancer in front sends the
// client's address before the client's first byte, and the proxy takes it
// as the connection's client address (RemoteAddr), on which classes,
// tenants, client shares and X-Forwarded-For key.
//
// From a trusted source the header is required (HAProxy's accept-proxy):
// a connection without one, with a malformed one, or whose header is not
// complete within HeaderTimeout, is closed. A v2 LOCAL (or v1 UNKNOWN)
// header keeps the balancer's own address, as its health checks send. A
// connection from any other source is served with its socket's address,
// unless it starts with a PROXY signature: then it is closed. Refusals
// are counted in proxy_proxy_protocol_rejected_total{reason}. The
// connection policer acts before the header is read: it sees the
// balancer's address. Changing it needs a restart.
type ProxyProtocolConfig struct {
	// Trusted are the addresses or CIDR prefixes of the load balancers
	// allowed (and required) to send the header (required: at least
	// one; a /0 prefix, which would let any client claim any address,
	// is refused).
	Trusted []string `yaml:"trusted"`
	// HeaderTimeout bounds the wait for a trusted source's complete
	// header, from the connection's start (default 5s).
	HeaderTimeout time.Duration `yaml:"header_timeout"`
}

func (p *ProxyProtocolConfig) setDefaults() {
	if p != nil && p.HeaderTimeout == 0 {
		p.HeaderTimeout = DefaultProxyProtocolHeaderTimeout
	}
}

// validate checks p (nil: off), at path (listeners[i].proxy_protocol).
func (p *ProxyProtocolConfig) validate(path string) error {
	if p == nil {
		return nil
	}
	if _, err := p.trust(path); err != nil {
		return err
	}
	if p.HeaderTimeout <= 0 {
		return fieldErr(path+".header_timeout", "%v is invalid: must be a positive duration such as 5s", p.HeaderTimeout)
	}
	return nil
}

// trust compiles Trusted into a longest-prefix table's membership test.
func (p *ProxyProtocolConfig) trust(path string) (func(netip.Addr) bool, error) {
	if len(p.Trusted) == 0 {
		return nil, fieldErr(path+".trusted", "at least one address or CIDR prefix of the load balancers that send the header is required")
	}
	var t netprefix.Table[struct{}]
	for i, s := range p.Trusted {
		pf, err := netprefix.Parse(s)
		if err != nil {
			return nil, fieldErr(fmt.Sprintf("%s.trusted[%d]", path, i), "%q is not a CIDR or address: %v", s, err)
		}
		if pf.Bits() == 0 {
			return nil, fieldErr(fmt.Sprintf("%s.trusted[%d]", path, i), "%q trusts every address: any client could claim any address; name the load balancers' addresses or subnet", s)
		}
		t.Insert(pf, struct{}{})
	}
	return func(a netip.Addr) bool { _, ok := t.Match(a); return ok }, nil
}

// newProxyProtocolRejected returns proxy_proxy_protocol_rejected_total
// with every reason exported from zero.
func newProxyProtocolRejected() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "proxy_proxy_protocol_rejected_total",
		Help: "Client connections closed for their PROXY protocol header, by reason (untrusted, missing, timeout, malformed, unsupported).",
	}, []string{"reason"})
	for _, r := range proxyproto.Reasons {
		c.WithLabelValues(string(r))
	}
	return c
}

// registerProxyProtocol creates proxy_proxy_protocol_rejected_total and
// registers it with reg when a listener of cfg has the PROXY protocol.
func (s *Server) registerProxyProtocol(cfg *Config, reg prometheus.Registerer) error {
	s.ppRejected = newProxyProtocolRejected()
	for i := range cfg.Listeners {
		if cfg.Listeners[i].ProxyProtocol != nil {
			return reg.Register(s.ppRejected)
		}
	}
	return nil
}

// withProxyProtocol puts the PROXY protocol of listener i on ln, when
// lc asks for it (on error ln is closed): the header is read in each connection's goroutine,
// under everything that reads the connection (the smuggling scanner, TLS,
// HTTP/2), above the policer and the connection cap, which see the
// socket's address.
func (s *Server) withProxyProtocol(ln net.Listener, i int, lc *ListenerConfig) (net.Listener, error) {
	if lc.ProxyProtocol == nil {
		return ln, nil
	}
	trusted, err := lc.ProxyProtocol.trust(fmt.Sprintf("listeners[%d].proxy_protocol", i))
	if err != nil {
		ln.Close()
		return nil, err
	}
	listen := ln.Addr().String()
	return proxyproto.NewListener(ln, proxyproto.Options{Trusted: trusted, HeaderTimeout: lc.ProxyProtocol.HeaderTimeout,
		Rejected: func(r proxyproto.Reason, peer net.Addr) {
			s.ppRejected.WithLabelValues(string(r)).Inc()
			s.log.Debug("PROXY protocol: connection refused", "reason", string(r), "peer", peer.String(), "listener", listen)
		}}), nil
}
