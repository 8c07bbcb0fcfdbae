// SPDX-License-Identifier: Apache-2.0

package client

import "github.com/prometheus/client_golang/prometheus"

// collector reports every destination's counters.
type collector struct {
	d                                                       *Dests
	attempts, retries, throttled, exhausted, deadline, prob *prometheus.Desc
}

func newCollector(ds *Dests, name string) *collector {
	var cl prometheus.Labels
	if name != "" {
		cl = prometheus.Labels{"client": name}
	}
	d := func(metric, help string) *prometheus.Desc {
		return prometheus.NewDesc(metric, help, []string{"destination"}, cl)
	}
	return &collector{d: ds,
		attempts:  d("sluice_client_attempts_total", "Attempts sent to the destination (host:port), first attempts and retries."),
		retries:   d("sluice_client_retries_total", "Retries sent to the destination."),
		throttled: d("sluice_client_throttled_total", "Attempts the adaptive throttle refused locally."),
		exhausted: d("sluice_client_budget_exhausted_total", "Retries not made because the destination's retry budget was spent."),
		deadline:  d("sluice_client_deadline_total", "Attempts not sent (or retries not made) because too little of the deadline was left."),
		prob:      d("sluice_client_throttle_probability", "The throttle's refusal probability at its last decision."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.attempts, c.retries, c.throttled, c.exhausted, c.deadline, c.prob} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	// The states of one destination (one per hop with Throttle.Scope
	// "hop") sum into its series; its probability is their highest.
	type sums struct {
		Counts
		name string
	}
	var order []*sums
	byName := map[string]*sums{}
	for _, ds := range c.d.states() {
		n := ds.d.Counts()
		if ds == c.d.others && n.Attempts+n.Throttled+n.Deadline == 0 {
			continue
		}
		s := byName[ds.name]
		if s == nil {
			s = &sums{name: ds.name}
			byName[ds.name] = s
			order = append(order, s)
		}
		s.Attempts += n.Attempts
		s.Retries += n.Retries
		s.Throttled += n.Throttled
		s.BudgetExhausted += n.BudgetExhausted
		s.Deadline += n.Deadline
		s.ThrottleProbability = max(s.ThrottleProbability, n.ThrottleProbability)
	}
	for _, s := range order {
		n := s.Counts
		for _, m := range []struct {
			d *prometheus.Desc
			v uint64
		}{{c.attempts, n.Attempts}, {c.retries, n.Retries}, {c.throttled, n.Throttled},
			{c.exhausted, n.BudgetExhausted}, {c.deadline, n.Deadline}} {
			ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v), s.name)
		}
		ch <- prometheus.MustNewConstMetric(c.prob, prometheus.GaugeValue, n.ThrottleProbability, s.name)
	}
}
