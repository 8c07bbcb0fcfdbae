// SPDX-License-Identifier: Apache-2.0

package control

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// fuzzController feeds a controller a short alternating sequence of two
// fuzzed measurements and checks every output is finite and bounded.
func fuzzController(f *testing.F, name string) {
	f.Add(int64(1e9), 0, 100.0, 50.0, 10.0, 100.0, 0.2, 0.5, 0.8, 40.0, 2.0)
	f.Add(int64(0), -1, math.NaN(), math.Inf(1), -5.0, 0.0, math.NaN(), math.Inf(-1), -0.3, math.NaN(), 0.0)
	f.Add(int64(-5), 7, 1e308, 1e308, 1e308, 1e308, 1e308, 1e308, 1e308, 1e308, 1e308)
	f.Fuzz(func(t *testing.T, elapsed int64, class int, arrivals, completed, rejected, samples, mean, p90, util, queue, scale float64) {
		mk := catalogue(t)[name]
		c := mk()
		m1 := sluice.Measurements{Elapsed: time.Duration(elapsed), Class: class, Arrivals: arrivals, Admitted: arrivals,
			Rejected: rejected, Completed: completed, Samples: samples, MeanRT: mean, P90RT: p90, Utilization: util, Queue: queue}
		m2 := m1
		m2.MeanRT, m2.P90RT, m2.Utilization, m2.Queue = mean*scale, p90*scale, util*scale, queue*scale
		for i := 1; i <= 30; i++ {
			m := m1
			if i%2 == 0 {
				m = m2
			}
			checkBounded(t, name, c.Update(at(i), m))
		}
	})
}

func FuzzKihl(f *testing.F)         { fuzzController(f, "kihl") }
func FuzzYaksha(f *testing.F)       { fuzzController(f, "yaksha") }
func FuzzYakshaStatic(f *testing.F) { fuzzController(f, "yaksha-static") }
func FuzzSEDA(f *testing.F)         { fuzzController(f, "seda") }
func FuzzSEDAClasses(f *testing.F)  { fuzzController(f, "seda-classes") }
func FuzzDegrader(f *testing.F)     { fuzzController(f, "seda-degrade") }
func FuzzVoigtCPU(f *testing.F)     { fuzzController(f, "voigt-cpu") }
func FuzzVoigtQueue(f *testing.F)   { fuzzController(f, "voigt-queue") }
func FuzzStaticRate(f *testing.F)   { fuzzController(f, "static-rate") }
