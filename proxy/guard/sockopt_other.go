// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package guard

import "net"

// limitUnsent is a no-op outside Linux (see sockopt_linux.go).
func limitUnsent(net.Conn) {}
