// SPDX-License-Identifier: Apache-2.0

package live

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/lab/testbed"
)

// capacityStep is the queue testbed whose mean service time doubles at a
// set instant: the testbed's service distribution has mean 2·peersService
// and each request asks for half of it (quality 0.5 in the testbed's
// quality header) before the instant and all of it after. The header is
// set here, behind every proxy, so no client or proxy can change it.
type capacityStep struct {
	testbed.Backend
	at atomic.Int64 // Unix nanoseconds of the change; 0 = never
}

func newCapacityStep(seed uint64) (*capacityStep, error) {
	cfg := testbed.DefaultQueueConfig()
	cfg.Workers, cfg.Discipline, cfg.Seed = peersWorkers, testbed.DisciplineFIFO, seed
	cfg.Service = "exp:" + (2 * peersService).String()
	q, err := testbed.NewQueue(cfg)
	if err != nil {
		return nil, err
	}
	return &capacityStep{Backend: q}, nil
}

// halveAt makes the capacity halve at t.
func (c *capacityStep) halveAt(t time.Time) { c.at.Store(t.UnixNano()) }

// stepQuality is the quality header value of a request arriving at now
// (Unix ns) when the capacity halves at at (Unix ns, 0 = never).
func stepQuality(now, at int64) string {
	if at != 0 && now >= at {
		return "1"
	}
	return "0.5"
}

func (c *capacityStep) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Header.Set(testbed.QualityHeader, stepQuality(time.Now().UnixNano(), c.at.Load()))
	c.Backend.ServeHTTP(w, r)
}
