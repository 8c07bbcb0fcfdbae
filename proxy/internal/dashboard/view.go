// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"time"

	"github.com/sluicehq/sluice/share"
	"github.com/sluicehq/sluice/stage"
)

// View is the dashboard's read-only view of a server: the proxy
// implements it. The dashboard reads it once a second for a sample (with
// the decisions of the last few seconds) and on every scrape of its
// metrics (with none); it never changes the server through it.
//
// State must be safe to call from the sampler's goroutine while the
// server serves, and return values the dashboard may keep: nothing in
// them is changed afterwards by the server.
type View interface {
	// State returns the server's state now, with at most decisions
	// recent decisions for each stage and for the policer.
	State(decisions int) State
}

// State is the server's state as the dashboard reads it: the running
// configuration's version and shadow mode, the requests in progress,
// every stage, the backend pool, the connection policer, the resource
// rules, the sensors and the client shares. Counters are totals since
// the process started; the dashboard makes rates of them.
type State struct {
	ConfigVersion uint64
	Shadow        bool
	// InFlight are the requests in progress, Streams the long-lived
	// responses among them.
	InFlight int64
	Streams  int64
	// Token reports whether the admin API needs a token (the page then
	// asks for it before a change).
	Token     bool
	Stages    []Stage
	Pool      Pool
	Policer   *Policer // nil without a connection policer
	Resources []Resource
	Sensors   []Sensor
	Shares    *share.Snapshot // nil without client shares
}

// Stage is one stage: its entry of the admin API's /state, with what the
// proxy knows of its controller beside it.
type Stage struct {
	stage.State
	// Objective is the statistic the response-time target holds: "p90",
	// "mean", "target" for another controller with a target, "" for one
	// without.
	Objective string
	// Floor is the most restrictive setting the controller can reach
	// (lowest rate or limit, highest drop probability); nil when it has
	// none or it is unknown.
	Floor *float64
}

// Pool is the backend pool.
type Pool struct {
	// Capacity is the sum of the servers' concurrency limits, InFlight
	// the slots held.
	Capacity int
	InFlight int
	// Queue is the wait queue's length, QueueMax its bound and
	// QueueTimeout its longest wait (as time.Duration.String writes it).
	Queue        int
	QueueMax     int
	QueueTimeout string
	// Rejected counts the requests the pool refused (queue full or timed
	// out); Waited those that waited for a slot and got one, and WaitNS
	// their waits summed, in nanoseconds.
	Rejected uint64
	Waited   uint64
	WaitNS   uint64
	Servers  []Backend
}

// Backend is one upstream server.
type Backend struct {
	URL      string
	InFlight int
	// Limit is the server's concurrency limit.
	Limit int
	// Served counts the requests it answered.
	Served uint64
}

// Policer is the connection policer: its controller, token rate
// (connections per second) and burst, connections offered, admitted and
// rejected (for any reason), the live connections, the input of its last
// period and its recent decisions.
type Policer struct {
	Controller string
	Rate       float64
	Burst      int
	Offered    uint64
	Admitted   uint64
	Rejected   uint64
	LiveConns  int
	Last       *PolicerPeriod // nil before the first period
	GuardError string
	Decisions  []stage.DecisionState
}

// PolicerPeriod is the input of the policer's last period: its length,
// connections offered per second, admitted and rejected in it, the wait
// queue, and the CPU guard's utilization in percent (nil when
// unavailable). It has the fields of the proxy's /state entry, under the
// same JSON names, by which the page shows them (elapsed_ns in
// milliseconds, as elapsed_ms).
type PolicerPeriod struct {
	Elapsed     time.Duration `json:"elapsed_ns"`
	HitsPerSec  float64       `json:"hits_per_second"`
	Admitted    float64       `json:"admitted"`
	Rejected    float64       `json:"rejected"`
	Queue       float64       `json:"queue"`
	Utilization *float64      `json:"utilization_percent,omitempty"`
}

// Resource is one resource rule: its stage, resource and sensor, its
// token rate (req/s), the requests offered per second over its last
// period, its rejections since start, and the sensor's value of the last
// period (nil without a reading; SensorError then says why).
type Resource struct {
	Stage       string
	Resource    string
	Sensor      string
	Rate        float64
	HitsPerSec  float64
	Rejected    uint64
	Input       *float64
	SensorError string
}

// Sensor is one sensor as the admin API's /state shows it, and as a
// sample carries it to the page: the same fields under the same JSON
// names.
type Sensor struct {
	Name        string   `json:"name"`
	Source      string   `json:"source"`
	Description string   `json:"description"`
	Unit        string   `json:"unit"`
	Value       *float64 `json:"value,omitempty"`
	// Bytes is the mean queued bytes (outqueue) or bytes per second
	// (bandwidth) of the last reading.
	Bytes  *float64  `json:"bytes,omitempty"`
	At     time.Time `json:"at,omitzero"`
	Error  string    `json:"error,omitempty"`
	Reads  uint64    `json:"reads"`
	Errors uint64    `json:"errors"`
}
