package dashboard

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The dashboard's metrics: the bytes its history holds, and what the
// dashboard, the Grafana dashboard and the alert rules need beyond
// /state's numbers: each stage's response-time target with the statistic
// it holds, the most restrictive setting its controller can reach, and
// the pool's wait.

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

// Register registers the dashboard's metrics with reg: the gauge
// proxy_ui_history_bytes, what the history holds, and from the view on
// every scrape each stage's target (proxy_stage_target_seconds) and
// setting floor (proxy_stage_setting_floor) and the pool's wait
// (proxy_queue_wait_seconds_total, proxy_queue_waits_total).
func (d *Dashboard) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "proxy_ui_history_bytes",
			Help: "Bytes the dashboard's 10-minute history holds (the newest minute as sent, older minutes compressed)."},
			d.hist.size),
		collector{d.view},
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// collector exports the stage targets and floors and the pool's wait.
type collector struct{ v View }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStageTarget, descStageFloor, descQueueWait, descQueueWaits} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.v.State(0)
	for i := range st.Stages {
		s := &st.Stages[i]
		if s.Target != "" {
			if d, err := time.ParseDuration(s.Target); err == nil {
				ch <- prometheus.MustNewConstMetric(descStageTarget, prometheus.GaugeValue, d.Seconds(), s.Name, s.Objective)
			}
		}
		if s.Floor != nil {
			ch <- prometheus.MustNewConstMetric(descStageFloor, prometheus.GaugeValue, *s.Floor, s.Name, s.Kind)
		}
	}
	ch <- prometheus.MustNewConstMetric(descQueueWait, prometheus.CounterValue, float64(st.Pool.WaitNS)/1e9)
	ch <- prometheus.MustNewConstMetric(descQueueWaits, prometheus.CounterValue, float64(st.Pool.Waited))
}
