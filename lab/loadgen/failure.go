// SPDX-License-Identifier: Apache-2.0

package loadgen

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// Failure kinds, what FailureKind returns: why a request got no HTTP
// response. The three timeouts say where the request's deadline
// (intended send time + Timeout) passed; a connection the server's kernel
// completed but its accept queue still holds counts as a response
// timeout, since the client's connect returns once the handshake is done.
const (
	FailPoolWait        = "pool_wait_timeout"  // every one of MaxConns connections busy until the deadline
	FailConnectTimeout  = "connect_timeout"    // the handshake did not complete (SYN dropped, e.g. a full accept queue), or ConnectTimeout passed
	FailResponseTimeout = "response_timeout"   // connected, no complete response by the deadline
	FailRefused         = "connection_refused" // ECONNREFUSED: nobody listening, or a reset SYN
	FailReset           = "connection_reset"   // ECONNRESET or EPIPE: the server reset or closed the connection mid-exchange
	FailClosed          = "connection_closed"  // EOF before a complete response
	FailAddrNotAvail    = "addr_not_available" // EADDRNOTAVAIL: no ephemeral port left (TIME_WAIT pile-up)
	FailFDLimit         = "fd_limit"           // EMFILE or ENFILE
	FailAborted         = "aborted"            // the run was cancelled
	FailOther           = "other"
)

// FailureKinds lists the kinds in a fixed order, for reports.
var FailureKinds = []string{FailPoolWait, FailConnectTimeout, FailResponseTimeout, FailRefused, FailReset, FailClosed,
	FailAddrNotAvail, FailFDLimit, FailAborted, FailOther}

// FailureKind classifies err, a RequestRecord's Err, into one of the
// kinds above; "" for a nil error (an HTTP response, whatever its status).
func FailureKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, errAborted):
		return FailAborted
	case errors.Is(err, errPoolWait):
		return FailPoolWait
	case errors.Is(err, errDialDeadline), errors.Is(err, errConnectTimeout):
		return FailConnectTimeout
	case errors.Is(err, errResponseDeadline), errors.Is(err, errDeadline):
		return FailResponseTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return FailReset
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return FailAddrNotAvail
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return FailFDLimit
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return FailClosed
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return FailResponseTimeout
	}
	return FailOther
}
