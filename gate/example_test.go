// SPDX-License-Identifier: Apache-2.0

package gate_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/gate"
)

func ExampleTokenBucket() {
	// 10 admissions per second with bursts of up to 5.
	b, err := gate.NewTokenBucket(10, 5)
	if err != nil {
		fmt.Println(err)
		return
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	admitted := 0
	for range 8 {
		if b.AllowAt(t0) {
			admitted++
		}
	}
	fmt.Println("admitted at t0:", admitted)
	fmt.Println("after 100ms:", b.AllowAt(t0.Add(100*time.Millisecond)), b.AllowAt(t0.Add(100*time.Millisecond)))

	// A controller halves the rate: tokens now accrue at 5/s.
	_ = b.SetRateAt(t0.Add(100*time.Millisecond), 5)
	fmt.Printf("tokens after another 100ms: %.1f\n", b.TokensAt(t0.Add(200*time.Millisecond)))

	_, err = gate.NewTokenBucket(-1, 5)
	fmt.Println(err)
	// Output:
	// admitted at t0: 5
	// after 100ms: true false
	// tokens after another 100ms: 0.5
	// gate: rate = -1: must be finite and >= 0 (tokens per second), or +Inf
}
