// SPDX-License-Identifier: Apache-2.0

package monitor_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/monitor"
)

// scripted is a QueueReader returning fixed queue lengths in turn.
type scripted []int64

func (s *scripted) QueuedBytes() (int64, error) {
	v := (*s)[0]
	*s = (*s)[1:]
	return v, nil
}

func (s *scripted) Describe() string { return "scripted" }

func ExampleOutQueue() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := monitor.DefaultOutQueueConfig() // scale 100, 20 samples per 1s
	cfg.CapacityBytes = 64 << 10
	r := scripted{0, 0, 16 << 10, 32 << 10, 48 << 10, 32 << 10, 16 << 10, 0, 0, 0}
	q, err := monitor.NewOutQueue(cfg, &r, start)
	if err != nil {
		panic(err)
	}
	for i := range 10 { // a runner would call Sample every 50ms
		q.Sample(start.Add(time.Duration(i+1) * cfg.SampleInterval()))
	}
	reading, err := q.Collect(start.Add(500 * time.Millisecond))
	fmt.Println(reading.Samples, reading.MeanBytes, reading.MaxBytes, reading.Queue, err)
	// Output:
	// 10 14745.6 49152 22.5 <nil>
}
