//go:build !linux

package proxy

import "net"

// limitUnsent is a no-op outside Linux (see sockopt_linux.go).
func limitUnsent(net.Conn) {}
