// SPDX-License-Identifier: Apache-2.0

package figure

import (
	"time"

	"github.com/sluicehq/sluice/lab/peers/breakwater"
	"github.com/sluicehq/sluice/lab/peers/dagor"
	"github.com/sluicehq/sluice/lab/peers/rajomon"
	"github.com/sluicehq/sluice/lab/peers/topfull"
	"github.com/sluicehq/sluice/lab/tune"
)

// How a point of a research peer's search space (tune.Point; durations
// in milliseconds) sets the peer's configuration, the same on every graph
// the peers are tuned on (the chain's and the hotel's). Each function
// sets only the parameters the point has: the others keep the value the
// configuration had (the paper's, or the graph's deployment facts).

// pointSetter sets one parameter of a configuration from its value in a
// point.
type pointSetter func(v float64)

// setPoint calls set[k] for each parameter k the point has.
func setPoint(p tune.Point, set map[string]pointSetter) {
	for k, f := range set {
		if v, ok := p[k]; ok {
			f(v)
		}
	}
}

// setMS sets a duration from a value in milliseconds.
func setMS(d *time.Duration) pointSetter {
	return func(v float64) { *d = time.Duration(v * float64(time.Millisecond)) }
}

// setFloat sets a float64 as it is.
func setFloat(f *float64) pointSetter { return func(v float64) { *f = v } }

// PointBreakwater sets Breakwater's target_delay_ms (the AQM's drop
// delay at twice it, as in the paper), md, client_delay_ms and rtt_ms.
func PointBreakwater(cfg *breakwater.Config, p tune.Point) {
	setPoint(p, map[string]pointSetter{
		"target_delay_ms": func(v float64) {
			setMS(&cfg.TargetDelay)(v)
			cfg.DropDelay = 2 * cfg.TargetDelay
		},
		"md":              setFloat(&cfg.MD),
		"client_delay_ms": setMS(&cfg.ClientDelay),
		"rtt_ms":          setMS(&cfg.RTT),
	})
}

// PointDAGOR sets DAGOR's queue_threshold_ms, window_ms, alpha and beta.
func PointDAGOR(cfg *dagor.Config, p tune.Point) {
	setPoint(p, map[string]pointSetter{
		"queue_threshold_ms": setMS(&cfg.QueueThreshold),
		"window_ms":          setMS(&cfg.Window),
		"alpha":              setFloat(&cfg.Alpha),
		"beta":               setFloat(&cfg.Beta),
	})
}

// PointRajomon sets Rajomon's latency_threshold_ms, price_update_ms,
// price_step, token_step, token_interval_ms and, with proportional 1,
// the proportional price strategy.
func PointRajomon(cfg *rajomon.Config, p tune.Point) {
	setPoint(p, map[string]pointSetter{
		"latency_threshold_ms": setMS(&cfg.LatencyThreshold),
		"price_update_ms":      setMS(&cfg.PriceUpdate),
		"price_step":           func(v float64) { cfg.PriceStep = int64(v) },
		"token_step":           func(v float64) { cfg.TokenStep = int64(v) },
		"token_interval_ms":    setMS(&cfg.TokenInterval),
		"proportional": func(v float64) {
			if v == 1 {
				cfg.PriceStrategy = rajomon.StrategyProportional
			}
		},
	})
}

// PointTopFull sets TopFull's slo_ms, alpha, decrease, increase and
// interval_ms.
func PointTopFull(cfg *topfull.Config, p tune.Point) {
	setPoint(p, map[string]pointSetter{
		"slo_ms":      setMS(&cfg.SLO),
		"alpha":       setFloat(&cfg.Alpha),
		"decrease":    setFloat(&cfg.Decrease),
		"increase":    setFloat(&cfg.Increase),
		"interval_ms": setMS(&cfg.Interval),
	})
}
