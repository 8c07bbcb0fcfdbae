// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/lab/report"
	"github.com/sluicehq/sluice/stage"
)

// GraphState is one sluice element of a chain at one instant, as the
// simulator samples it every 100 ms (the live driver samples the proxy
// row's proxies over their admin /state; the in-process tiers have no
// admin listener): where a storm's memory is held after it ends. A hop's client side (Hop
// "tier1→tier2", …) has ThrottleP and Forgets; a hop's stage (Hop
// "tier1", …) has the rest. A value the element does not have is NaN.
type GraphState struct {
	Time time.Duration
	Hop  string
	// ThrottleP is the client side's throttle probability toward the
	// hop; Forgets counts the accept runs that made its window forget
	// (client.Counts.Forgets).
	ThrottleP, Forgets float64
	// Limit is auto's L; WindowLimit the limit in force (a probe's, or
	// L); InFlight and Queued the stage's; MaxWaitMS the longest a new
	// arrival may wait; Rejected the stage's rejections so far (every
	// class).
	Limit, WindowLimit, InFlight, Queued, MaxWaitMS, Rejected float64
}

// NaNState returns a GraphState of hop at t with every value NaN.
func NaNState(t time.Duration, hop string) GraphState {
	n := math.NaN()
	return GraphState{Time: t, Hop: hop, ThrottleP: n, Forgets: n, Limit: n, WindowLimit: n, InFlight: n, Queued: n, MaxWaitMS: n, Rejected: n}
}

// StageState returns the GraphState of a stage named hop at t from its
// state (stage.Stage.State, or a proxy's /state).
func StageState(t time.Duration, hop string, st stage.State) GraphState {
	s := NaNState(t, hop)
	if l, ok := st.Estimates["limit"]; ok {
		s.Limit = l
	}
	if c := st.InFlightLimited; c != nil {
		s.WindowLimit, s.InFlight, s.Queued, s.MaxWaitMS = float64(c.Limit), float64(c.InFlight), float64(c.Queued), c.MaxWaitSeconds*1000
	}
	rej := 0.0
	for _, c := range st.Classes {
		rej += float64(c.Rejected)
	}
	s.Rejected = rej
	return s
}

// stateTable returns state.csv: one line per sample, row and hop.
func stateTable(runs []*GraphRun) (*report.Table, error) {
	t := report.NewTable("row", "time_s", "hop", "throttle_p", "forgets", "limit", "window_limit", "in_flight", "queued", "max_wait_ms", "rejected")
	for _, run := range runs {
		for _, s := range run.State {
			if err := t.Append(run.Row, s.Time.Seconds(), s.Hop, s.ThrottleP, s.Forgets, s.Limit, s.WindowLimit, s.InFlight, s.Queued, s.MaxWaitMS, s.Rejected); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}
