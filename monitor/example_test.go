// SPDX-License-Identifier: Apache-2.0

package monitor_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/monitor"
)

func ExampleWindow() {
	w, err := monitor.NewWindow(100)
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 10; i++ {
		w.Record(time.Duration(i) * time.Millisecond)
	}
	st := w.Stats(true) // read and start over
	fmt.Println(st.Count, st.Mean, st.P50, st.P90, st.P99)
	fmt.Println(w.Len())
	// Output:
	// 10 5.5ms 5ms 9ms 10ms
	// 0
}

func ExampleRecorder() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	r, err := monitor.NewRecorder(100, start)
	if err != nil {
		panic(err)
	}
	// The request path:
	for i := 1; i <= 4; i++ {
		r.Arrive()
		if i == 4 {
			r.Reject()
			continue
		}
		r.Admit()
		r.Complete(time.Duration(i)*100*time.Millisecond, true)
	}
	r.Arrive()
	r.Admit()
	r.Complete(30*time.Second, false) // a timeout: counted, not a sample

	// The runner, once per period:
	m := r.Collect(start.Add(time.Second))
	fmt.Printf("elapsed=%v arrivals=%v admitted=%v rejected=%v completed=%v\n",
		m.Elapsed, m.Arrivals, m.Admitted, m.Rejected, m.Completed)
	fmt.Printf("samples=%v mean=%.3fs p90=%.3fs\n", m.Samples, m.MeanRT, m.P90RT)
	// Output:
	// elapsed=1s arrivals=5 admitted=4 rejected=1 completed=4
	// samples=3 mean=0.200s p90=0.300s
}

func ExampleEWMA() {
	e, err := monitor.NewEWMA(0.7) // SEDA: cur = 0.7·cur + 0.3·samp
	if err != nil {
		panic(err)
	}
	for _, x := range []float64{1.0, 2.0, 2.0} {
		fmt.Printf("%.2f\n", e.Update(x))
	}
	// Output:
	// 1.00
	// 1.30
	// 1.51
}
