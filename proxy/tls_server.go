// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"time"

	"github.com/sluicehq/sluice/proxy/tlsconf"
)

// newServerTLS loads the files of c, the TLS setting at path p, and
// returns the watch that serves them, reporting to s's log and metrics.
func (s *Server) newServerTLS(p string, c *TLSConfig) (*tlsconf.Watch, error) {
	w, err := tlsconf.NewServerWatch(p, c, time.Now())
	if err != nil {
		return nil, err
	}
	w.SetOutputs(s.log, s.tlsm)
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
		_, _ = g.pool.tls.Watch().Check(now)
	}
}
