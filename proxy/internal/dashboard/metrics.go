// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Register registers the dashboard's metric with reg: the gauge
// proxy_ui_history_bytes, what the history holds.
func (d *Dashboard) Register(reg prometheus.Registerer) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "proxy_ui_history_bytes",
		Help: "Bytes the dashboard's 10-minute history holds (the newest minute as sent, older minutes compressed)."},
		d.hist.size))
}
