// SPDX-License-Identifier: Apache-2.0

package share_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/share"
)

// Example drives a Shares in virtual time, as the simulator does: client a
// (10 % of 100 KB/s) is active and under its allocation, so the server is
// "unsatisfied" and d, over its allocation, is held to b_d.
func Example() {
	cfg := share.DefaultConfig()
	cfg.TotalBandwidth = 100e3 // 100 KB/s
	cfg.Clients = []share.ClientConfig{
		{Name: "a", Share: 10, CIDRs: []string{"10.0.0.1"}},
		{Name: "d", Share: 40, APIKeys: []share.APIKey{"key-d"}},
	}
	s, err := share.New(cfg)
	if err != nil {
		panic(err)
	}
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	a, _ := s.Lookup("a")
	d := s.Matcher().Match(share.Identity{APIKey: "key-d"})

	// a: one 10 KB reply in 2 s → avg_a = 0.2 · 5 KB/s = 1 KB/s < 10 KB/s.
	r, _ := s.Begin(now, a)
	r.Done(now.Add(2*time.Second), 10e3)
	// d: one 10 KB reply in 50 ms → avg_d = 0.2 · 200 KB/s = 40 KB/s ≥ b_d.
	r, _ = s.Begin(now, d)
	r.Done(now.Add(50*time.Millisecond), 10e3)

	for _, c := range []share.ClientID{a, d} {
		delay, _ := s.Delay(now, c, 10e3)
		fmt.Printf("%s: avg %.0f B/s, d_i %.0f B/s, delay for 10 KB %v\n",
			s.Name(c), s.Average(c), s.Available(c), delay)
	}
	s.Tick(now.Add(time.Second)) // the manager: both were active, no decay
	fmt.Printf("Â = %.0f B/s, unsatisfied = %v\n", s.MaxMeasured(), s.Unsatisfied())
	// Output:
	// a: avg 1000 B/s, d_i 19000 B/s, delay for 10 KB 426.315789ms
	// d: avg 40000 B/s, d_i 40000 B/s, delay for 10 KB 150ms
	// Â = 100000 B/s, unsatisfied = false
}
