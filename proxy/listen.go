// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"errors"
	"net"
	"os"

	"github.com/sluicehq/sluice/proxy/guard"
)

// clientConnCap returns the cap on client connections of cfg and where
// it comes from (guard.ConnCap): max_client_connections, or the
// file-descriptor limit less guard.ReservedFDs and the upstream
// connections (every server's max_concurrency in use plus
// max_idle_conns_per_host idle).
func clientConnCap(cfg *Config) (int, string) {
	up := 0
	for _, s := range cfg.Backends.Servers {
		up += s.MaxConcurrency + cfg.Backends.MaxIdleConnsPerHost
	}
	return guard.ConnCap(cfg.MaxClientConnections, up)
}

// listenError is a failure to bind a configured address, as a
// *sluice.FieldError naming the field and address.
func listenError(path, addr string, err error) error {
	msg := err.Error()
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		msg = op.Err.Error()
		var se *os.SyscallError
		if errors.As(op.Err, &se) {
			msg = se.Err.Error()
		}
	}
	return fieldErr(path, "%q cannot be bound: %s", addr, msg)
}
