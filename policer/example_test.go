// SPDX-License-Identifier: Apache-2.0

package policer_test

import (
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/sluicehq/sluice/policer"
)

func ExamplePolicer() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := policer.DefaultConfig() // bucket 20, 1000 connections/s
	cfg.Sources.Default = &policer.SourceLimit{Rate: 2, Burst: 2}
	cfg.Sources.Rules = []policer.SourceRule{
		{Prefix: "192.0.2.0/24", Rate: 0},              // deny
		{Prefix: "198.51.100.0/24", Rate: math.Inf(1)}, // exempt from per-source limits
	}
	p, err := policer.New(cfg, start)
	if err != nil {
		panic(err)
	}
	for _, src := range []string{"203.0.113.5", "203.0.113.5", "203.0.113.5", "192.0.2.1", "198.51.100.9"} {
		fmt.Println(src, p.Admit(start, netip.MustParseAddr(src)))
	}
	// A controller lowers the global rate; the bucket still holds 17 tokens.
	if err := p.SetRate(start, 10); err != nil {
		panic(err)
	}
	m := p.Collect(start.Add(time.Second))
	fmt.Println(m.Arrivals, m.Admitted, m.Rejected, p.Rate())
	// Output:
	// 203.0.113.5 admitted
	// 203.0.113.5 admitted
	// 203.0.113.5 source
	// 192.0.2.1 source
	// 198.51.100.9 admitted
	// 5 3 2 10
}
