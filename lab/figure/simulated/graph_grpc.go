// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/grpcsluice"
	"github.com/sluicehq/sluice/lab/figure"
)

// The chain over gRPC in virtual time (--set transport=grpc): the same
// chain, with the in-process row's client side judging each answer as
// grpcsluice's client interceptor judges a gRPC status (grpcsluice.Judge,
// the very function), from the status the live chain's hops give: a
// stage's refusal is grpcsluice.Overloaded (RESOURCE_EXHAUSTED with a
// RetryInfo of the stage's Retry-After), a tier whose client side refused
// the call answers RESOURCE_EXHAUSTED without one (which is not retried),
// and a tier relays the next hop's status as it came (the live tier
// returns the next hop's error). A call that ran out of time is
// DEADLINE_EXCEEDED (not retried, and accepted by the throttle, unlike
// HTTP's 504, which is retried), a caller that left CANCELLED. The rows
// are the in-process rows and grpc-throttle (whose retries stay the lab's
// model of grpc-go's retryThrottling, as over HTTP); a stage rejection
// for want of deadline, DEADLINE_EXCEEDED live, is an overload refusal
// here (sim.Stage does not tell them apart).

// declareTransport declares the simulator's transport parameter of the
// chain figures (live, the experiment's --transport).
func declareTransport(ps *Params, c *figure.GraphParams) {
	ps.Choice(&c.Transport, "transport", "http", []string{"http", "grpc"}, "the chain's protocol: http, or grpc (the in-process row's client side judges gRPC statuses as grpcsluice does; rows inprocess and grpc-throttle)")
}

// checkTransport checks the rows of a gRPC chain: the rows left at the
// figure's default become the rows that have a gRPC form (as the live
// experiment runs them); a row named that has none is an error.
func checkTransport(c *figure.GraphParams) error {
	if c.Transport != "grpc" {
		return nil
	}
	def := figure.GraphRows
	switch {
	case c.Recover:
		def = figure.GraphRecoverRows
	case c.Crowd:
		def = figure.GraphCrowdRows
	}
	if slices.Equal(c.Rows, def) {
		c.Rows = figure.GraphGRPCRows
		if c.Recover {
			c.Rows = figure.GraphRecoverGRPCRows
		}
		return nil
	}
	for _, row := range c.Rows {
		if !slices.Contains(figure.GraphGRPCRows, row) && row != figure.GraphInProcessWindow {
			return fmt.Errorf("row %s has no gRPC form: with transport=grpc the rows are %s", row, strings.Join(append(slices.Clone(figure.GraphGRPCRows), figure.GraphInProcessWindow), ", "))
		}
	}
	return nil
}

// grpcResult returns how grpcsluice's client side judges the gRPC status
// a hop answers with where the HTTP chain answers status (with
// Retry-After ra; throttled: a client side's refusal). Status keeps the
// HTTP status, which the tiers relay.
func grpcResult(st int, ra time.Duration, throttled bool) client.Result {
	var err error
	switch {
	case st == http.StatusOK:
	case st == http.StatusServiceUnavailable && throttled:
		err = status.Error(codes.ResourceExhausted, client.ErrThrottled.Error())
	case st == http.StatusServiceUnavailable:
		err = grpcsluice.Overloaded(figure.GraphStage, "", ra)
	case st == http.StatusGatewayTimeout || st == 0:
		err = status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case st == http.StatusBadGateway:
		err = status.Error(codes.Canceled, "the caller left")
	default:
		err = status.Error(codes.Unknown, http.StatusText(st))
	}
	r := grpcsluice.Judge(err, nil)
	r.Status = st
	return r
}
