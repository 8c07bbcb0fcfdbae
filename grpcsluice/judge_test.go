// SPDX-License-Identifier: Apache-2.0

package grpcsluice

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Judge: an overload refusal, answers, and no answer (which the client
// side's throttle counts as accepted but not as evidence that the
// destination accepts again).
func TestJudge(t *testing.T) {
	for _, c := range []struct {
		code                       codes.Code
		refused, noAnswer, retried bool
	}{
		{codes.OK, false, false, false},
		{codes.ResourceExhausted, true, false, false},
		{codes.Unavailable, false, true, true},
		{codes.DeadlineExceeded, false, true, false},
		{codes.Canceled, false, true, false},
		{codes.Internal, false, false, false},
		{codes.NotFound, false, false, false},
	} {
		var err error
		if c.code != codes.OK {
			err = status.Error(c.code, "x")
		}
		r := Judge(err, nil)
		if !r.Judged || r.Refused != c.refused || r.NoAnswer != c.noAnswer || r.Retryable != c.retried {
			t.Errorf("%v: %+v", c.code, r)
		}
	}
}
