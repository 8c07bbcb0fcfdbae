// SPDX-License-Identifier: Apache-2.0

package figure

import "github.com/sluicehq/sluice/lab/tune"

// HotelTuned is the best point the search found for each peer in each
// scenario of graph-hotel (the hotel graph, virtual time), written by
// lab/cmd/hoteltune, one invocation per scenario (step-1.4, step-3,
// step-8: -seeds 1 -refine 2 -set warm=4s,after=10s; drop, crowd,
// cost-10: -seeds 1 -refine 1 -set warm=2s,after=5s; cost-50 was not
// searched: its peers run at their papers' values). The tables are in
// docs/experiments.md. Both drivers run the peers' rows with it
// (peer_params=tuned).
var HotelTuned = map[string]map[string]tune.Point{
	"step-1.4": {
		"breakwater": {"client_delay_ms": 100, "md": 0.149535, "rtt_ms": 2, "target_delay_ms": 10},
		"dagor":      {"alpha": 0.05, "beta": 0.01, "queue_threshold_ms": 10, "window_ms": 100},
		"rajomon":    {"latency_threshold_ms": 10, "price_step": 1, "price_update_ms": 2, "proportional": 0, "token_interval_ms": 5.47723},
		"topfull":    {"alpha": 0.6, "decrease": 0.2, "increase": 0.25, "interval_ms": 250, "slo_ms": 50},
	},
	"step-3": {
		"breakwater": {"client_delay_ms": 10, "md": 0.1, "rtt_ms": 10, "target_delay_ms": 135.12},
		"dagor":      {"alpha": 0.4, "beta": 0.01, "queue_threshold_ms": 17.3205, "window_ms": 63.2456},
		"rajomon":    {"latency_threshold_ms": 3, "price_step": 1, "price_update_ms": 10, "proportional": 0, "token_interval_ms": 3},
		"topfull":    {"alpha": 0.9, "decrease": 0.316228, "increase": 0.25, "interval_ms": 125, "slo_ms": 50},
	},
	"step-8": {
		"breakwater": {"client_delay_ms": 10, "md": 1, "rtt_ms": 2, "target_delay_ms": 30},
		"dagor":      {"alpha": 0.653197, "beta": 0.01, "queue_threshold_ms": 3, "window_ms": 63.2456},
		"rajomon":    {"latency_threshold_ms": 3, "price_step": 1, "price_update_ms": 10, "proportional": 0, "token_interval_ms": 10},
		"topfull":    {"alpha": 0.5, "decrease": 0.790569, "increase": 0.25, "interval_ms": 125, "slo_ms": 50},
	},
	"drop": {
		"breakwater": {"client_delay_ms": 100, "md": 0.223607, "rtt_ms": 2, "target_delay_ms": 30},
		"dagor":      {"alpha": 0.4, "beta": 0.01, "queue_threshold_ms": 10, "window_ms": 100},
		"rajomon":    {"latency_threshold_ms": 3, "price_step": 1, "price_update_ms": 10, "proportional": 0, "token_interval_ms": 17.3205},
		"topfull":    {"alpha": 0.5, "decrease": 0.2, "increase": 0.25, "interval_ms": 250, "slo_ms": 353.553},
	},
	"crowd": {
		"breakwater": {"client_delay_ms": 10, "md": 0.1, "rtt_ms": 2, "target_delay_ms": 3},
		"dagor":      {"alpha": 0.4, "beta": 0.01, "queue_threshold_ms": 10, "window_ms": 100},
		"rajomon":    {"latency_threshold_ms": 10, "price_step": 1, "price_update_ms": 10, "proportional": 0, "token_interval_ms": 10},
		"topfull":    {"alpha": 0.5, "decrease": 0.5, "increase": 0.25, "interval_ms": 125, "slo_ms": 50},
	},
	"cost-10": {
		"breakwater": {"client_delay_ms": 500, "md": 0.02, "rtt_ms": 2, "target_delay_ms": 51.9615},
		"dagor":      {"alpha": 0.15, "beta": 0.4, "queue_threshold_ms": 10, "window_ms": 100},
		"rajomon":    {"latency_threshold_ms": 10, "price_step": 1, "price_update_ms": 2, "proportional": 0, "token_interval_ms": 10},
		"topfull":    {"alpha": 0.5, "decrease": 0.05, "increase": 0.01, "interval_ms": 250, "slo_ms": 50},
	},
}
