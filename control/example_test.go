// SPDX-License-Identifier: Apache-2.0

package control_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/control"
)

// A SEDA stage with a 1 s p90 target cuts its token rate by adj_d = 1.2
// when the measured p90 is over target.
func ExampleSEDA() {
	cfg := control.DefaultSEDAConfig()
	cfg.Target, cfg.InitialRate = time.Second, 100
	c, err := control.NewSEDA(cfg)
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := c.Update(now, sluice.Measurements{Elapsed: time.Second, Samples: 100, P90RT: 2})
	fmt.Printf("%.2f %s\n", d.New, d.Kind.Unit())
	fmt.Println(d.Reason)
	// Output:
	// 83.33 req/s
	// p90 2s (cur 2s, target 1s, err +1.00) after 100 samples: over target: rate 100 req/s → 83.33 req/s (÷1.2)
}
