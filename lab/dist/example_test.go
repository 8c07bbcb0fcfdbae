// SPDX-License-Identifier: Apache-2.0

package dist_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/lab/dist"
)

func ExampleParseDuration() {
	think, err := dist.ParseDuration("exp:0.7s,max=7s")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(think)
	fmt.Printf("mean %.4f s\n", think.Mean())
	_, err = dist.ParseDuration("lognormal:20ms,fast")
	fmt.Println(err)
	// Output:
	// exp:0.7,max=7
	// mean 0.7000 s
	// distribution "lognormal:20ms,fast": SIGMA = "fast": expected a plain number like 1.5
}

func ExampleConstant() {
	rate, _ := dist.ParseSchedule("0s:2,1s:4")
	a := dist.Constant{Rate: rate}
	r := rand.New(rand.NewPCG(1, 1))
	var t time.Duration
	for range 5 {
		t = a.Next(r, t)
		fmt.Println(t)
	}
	// Output:
	// 500ms
	// 1s
	// 1.25s
	// 1.5s
	// 1.75s
}
