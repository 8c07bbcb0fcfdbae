// SPDX-License-Identifier: Apache-2.0

package design_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/control/design"
)

// The design of Andersson, Kihl, Robertsson and Wittenmark: σ = 44.4
// departures per 1 s period, desired polynomial z·(z² − 1.55z + 0.71).
func ExampleKihlPlace() {
	K, Ti, err := design.KihlPlace(44.4, time.Second, -1.55, 0.71)
	if err != nil {
		panic(err)
	}
	fmt.Printf("K = %.2f, Ti = %.2f s\n", K, Ti)
	// Output: K = 19.98, Ti = 2.81 s
}

// The paper's good and bad parameter sets.
func ExampleKihlAnalyze() {
	for _, Ti := range []float64{2.8, 0.1} {
		a, err := design.KihlAnalyze(44.4, time.Second, 20, Ti)
		if err != nil {
			panic(err)
		}
		fmt.Printf("Ti = %v: linear %v, Tsypkin %v\n", Ti, a.StableLinear, a.StableTsypkin)
	}
	// Output:
	// Ti = 2.8: linear true, Tsypkin true
	// Ti = 0.1: linear false, Tsypkin false
}

func ExampleYaksha() {
	g, err := design.Yaksha(150*time.Millisecond, 50, time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Printf("Kg %.4f Kp %.4f Ki %.4f A %.4f B %.4f\n", g.Kg, g.Kp, g.Ki, g.A, g.B)
	// Output: Kg 1.1250 Kp 0.6285 Ki 0.1517 A 0.7044 B 0.5527
}
