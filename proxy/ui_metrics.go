package proxy

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/stage"
)

// What the dashboard, the Grafana dashboard and the alert rules need
// beyond /state's numbers: each stage's response-time target with the
// statistic it holds, the most restrictive setting its controller can
// reach, and the pool's wait.

var (
	descStageTarget = prometheus.NewDesc("proxy_stage_target_seconds",
		"Response-time target of a stage's controller, in seconds, and the statistic it holds (objective: p90, mean, or target when unknown).",
		[]string{"stage", "objective"}, nil)
	descStageFloor = prometheus.NewDesc("proxy_stage_setting_floor",
		"Most restrictive setting a stage's controller can reach (lowest rate in req/s, highest drop probability), for the controllers that have one.",
		[]string{"stage", "kind"}, nil)
	descQueueWait = prometheus.NewDesc("proxy_queue_wait_seconds_total",
		"Time spent in the backend pool's wait queue by requests that waited and got a server slot, in seconds.", nil, nil)
	descQueueWaits = prometheus.NewDesc("proxy_queue_waits_total",
		"Requests that waited in the backend pool's queue and got a server slot.", nil, nil)
)

// objectiveOf returns the statistic a stage's response-time target holds:
// "p90" (seda, with or without degradation), "mean" (yaksha), "target"
// for another controller with a target, "" for one without.
func objectiveOf(st *stage.Stage) string {
	switch st.Controller().Unwrap().(type) {
	case *control.SEDA, *control.Degrader:
		return "p90"
	case *control.Yaksha:
		return "mean"
	case control.Targeted:
		return "target"
	}
	return ""
}

// floors caches the setting floors of one configuration.
var floors struct {
	mu  sync.Mutex
	cfg *Config
	m   map[string]float64
}

// settingFloor returns the most restrictive setting of stage name's
// controller in cfg — the lowest rate of a rate controller, the highest
// drop probability of yaksha — and whether it has one. A static
// controller has none (its setting never moves), nor does an unknown one.
func settingFloor(cfg *Config, name, kind string) (float64, bool) {
	floors.mu.Lock()
	defer floors.mu.Unlock()
	if floors.cfg != cfg {
		floors.cfg, floors.m = cfg, map[string]float64{}
		if ctrls, err := cfg.StageControllers(); err == nil {
			for n, c := range ctrls {
				switch c := c.(type) {
				case *control.SEDAConfig:
					floors.m[n] = c.RateMin
				case *control.VoigtCPUConfig:
					floors.m[n] = c.MinRate
				case *control.VoigtQueueConfig:
					floors.m[n] = c.MinRate
				case *control.KihlConfig:
					floors.m[n] = 0
				case *control.YakshaConfig:
					floors.m[n] = c.MaxDrop
				}
			}
		}
	}
	f, ok := floors.m[name]
	if ok && kind == "none" {
		return 0, false
	}
	return f, ok
}

// dashCollector exports the stage targets and floors and the pool's wait.
type dashCollector struct{ h *Handler }

func (c dashCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStageTarget, descStageFloor, descQueueWait, descQueueWaits} {
		ch <- d
	}
}

func (c dashCollector) Collect(ch chan<- prometheus.Metric) {
	g := c.h.gen.Load()
	if g == nil {
		return
	}
	for _, st := range g.pol.Stages() {
		s := st.State(0)
		if s.Target != "" {
			if d, err := time.ParseDuration(s.Target); err == nil {
				ch <- prometheus.MustNewConstMetric(descStageTarget, prometheus.GaugeValue, d.Seconds(), s.Name, objectiveOf(st))
			}
		}
		if f, ok := settingFloor(g.cfg, s.Name, s.Kind); ok {
			ch <- prometheus.MustNewConstMetric(descStageFloor, prometheus.GaugeValue, f, s.Name, s.Kind)
		}
	}
	n, ns := g.pool.waits()
	ch <- prometheus.MustNewConstMetric(descQueueWait, prometheus.CounterValue, float64(ns)/1e9)
	ch <- prometheus.MustNewConstMetric(descQueueWaits, prometheus.CounterValue, float64(n))
}
