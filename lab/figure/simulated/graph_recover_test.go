// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"fmt"
	"strings"
	"testing"
)

// graph-recover in virtual time, over HTTP and over gRPC, seeds 1–3: the
// sluice rows answer ≥ 95 % of each second's calls from the first full
// second after the crowd and after the capacity drop, while the crowd and
// the drop are still cut to what the chain serves; and the in-process
// row with the SRE book's throttle window (the clients' throttle before
// it forgot at an accept run) still refuses about a third of the calls
// in the first seconds after the crowd, for about 7 s.
func TestGraphRecover(t *testing.T) {
	for _, transport := range []string{"http", "grpc"} {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed%d", transport, seed), func(t *testing.T) {
				t.Parallel()
				// Four checks for each of proxy and inprocess; the
				// window row is for comparison.
				rows, want := "proxy,inprocess,inprocess-window", 8
				if transport == "grpc" {
					rows, want = "inprocess,inprocess-window", 4
				}
				res := runResult(t, "graph-recover", seed, "transport="+transport, "rows="+rows)
				met, total := res.Passed()
				if met != total || total != want {
					for _, c := range res.Checks {
						if !c.Pass {
							t.Errorf("%s: %s", c.Claim, c.Measured)
						}
					}
					t.Fatalf("%d of %d checks met, want %d of %d", met, total, want, want)
				}
				s := res.Summary
				within(t, s, "after_crowd_first_ratio_inprocess_window", 0.5, 0.85)
				within(t, s, "after_crowd_short_s_inprocess_window", 5, 9)
			})
		}
	}
}

// Over gRPC a rows list with a row that has no gRPC form is refused.
func TestGraphRecoverGRPCRows(t *testing.T) {
	if _, err := runErr(t, "graph-recover", 1, "transport=grpc", "rows=proxy,inprocess"); err == nil || !strings.Contains(err.Error(), "no gRPC form") {
		t.Errorf("proxy over gRPC: %v", err)
	}
}
