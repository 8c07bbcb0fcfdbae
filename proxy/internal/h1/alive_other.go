// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package h1

import "net"

// connAlive cannot peek without blocking here: an idle connection is
// taken as alive (a request that is not replayable may then fail on a
// connection the server closed, as with http.Transport's own race).
func connAlive(net.Conn) bool { return true }
