// SPDX-License-Identifier: Apache-2.0

package live

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/tick"
)

// namedProxy is a proxy of the chain's proxy row, named as the
// simulator names its stage (tier1-proxy, tier2-proxy, backend-proxy).
type namedProxy struct {
	name string
	p    *childProxy
}

// stateEvery is how often the proxies' stages are sampled, as the
// simulator samples its elements.
const stateEvery = 100 * time.Millisecond

// sampleProxies reads every proxy's stage (figure.GraphStage) over its
// admin /state every stateEvery until stop, into run.State (under mu):
// the live form of the simulator's state.csv, for the proxy row.
func sampleProxies(proxies []namedProxy, run *figure.GraphRun, mu *sync.Mutex, t0 time.Time, stop <-chan struct{}) {
	if len(proxies) == 0 {
		return
	}
	tick.Every(stop, stateEvery, func() {
		at := time.Since(t0)
		for _, np := range proxies {
			st, ok := np.p.stage(figure.GraphStage, 0)
			if !ok {
				continue
			}
			s := figure.StageState(at, np.name, st)
			mu.Lock()
			run.State = append(run.State, s)
			mu.Unlock()
		}
	})
}
