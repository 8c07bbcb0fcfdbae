// SPDX-License-Identifier: Apache-2.0

package auto_test

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control/auto"
)

// auto is told only the SLO. Stepped by Update on a service that runs 4
// requests at a time at 10 ms each, with waiters always queued in front
// of the limit (the number in service is the limit; above 4 the service
// time grows by Little's law), its probes find the knee from the initial
// limit of 16: the limit settles near the service's parallelism. The
// queue stands (three arrivals for each completion), so a new arrival
// may wait only the standing wait (StandingWait; by default the longer
// of one mean service time and SLO/10: 25 ms here).
func ExampleNew() {
	cfg := auto.DefaultConfig()
	cfg.SLO = 250 * time.Millisecond
	a, err := auto.New(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Println(a.Current().Reason)

	const parallelism, service = 4.0, 0.010 // requests, seconds
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := a.Period()
	var d sluice.Decision
	for range int(60 * time.Second / h) {
		now = now.Add(h)
		n := a.Current().New // in service: the limit
		r := service * math.Max(1, n/parallelism)
		done := math.Min(n, parallelism) / service * h.Seconds()
		d = a.Update(now, sluice.Measurements{Elapsed: h, Arrivals: 3 * done, Admitted: done, Rejected: 2 * done,
			Completed: done, InFlight: n, MaxInFlight: n, ServiceSamples: done, ServiceMean: r, ServiceP50: r,
			ServiceP90: 1.5 * r, ServiceP99: 2 * r, ServiceMin: r / 4, QueueWaitMean: r, QueueWaitMin: r / 10, Queue: n})
	}
	fmt.Printf("after 60 s: limit %.2f (%s), a waiter may wait up to %v\n", a.Limit(), d.Kind, d.MaxWait.Round(time.Millisecond))
	// Output:
	// initial: limit 16; nothing measured yet, a request may wait up to SLO/2 = 125ms
	// after 60 s: limit 4.74 (concurrency), a waiter may wait up to 25ms
}
