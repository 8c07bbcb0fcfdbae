// SPDX-License-Identifier: Apache-2.0

package share

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sharetest"
)

// TestLiveLoopbackShares is the live check of §3 on a real loopback
// listener: B = 400 KB/s (far below what loopback does) shared by four
// clients a–d with 10/20/30/40 %, each a closed-loop user asking for
// 10 KB replies back to back (more than its share), identified by the
// client header from a trusted peer. Â₀ = 4·B (see the package
// documentation, "Accuracy"). In steady state each client's share of the
// delivered bytes must be within ±2 points of its allocation and the total
// within 10 % of B; then a and b go idle and c and d must take up the
// slack. The run takes about 20 s of real time.
func TestLiveLoopbackShares(t *testing.T) {
	if testing.Short() {
		t.Skip("live test (20 s)")
	}
	const B = 400e3
	cfg := paperConfig(4 * B)
	names := []string{"a", "b", "c", "d"}
	for i := range cfg.Clients {
		cfg.Clients[i].HeaderValues = []string{names[i]}
	}
	s := mustNew(t, cfg)
	body := make([]byte, 10000)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	identify := func(r *http.Request) ClientID { return s.Matcher().MatchRequest(r, true) } // loopback peer: trusted
	srv := httptest.NewServer(Middleware(s, identify)(handler))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx) })

	clients := sharetest.Start(srv.URL, DefaultClientHeader, names)
	all := clients.Window(3*time.Second, 6*time.Second)
	clients.Idle(0)
	clients.Idle(1)
	two := clients.Window(5*time.Second, 5*time.Second)
	clients.Stop()
	cancel()
	wg.Wait()

	sh, total := sharesOf(all)
	t.Logf("all active: shares a %.2f  b %.2f  c %.2f  d %.2f %% (allocations 10/20/30/40), total %.1f KB/s = %.3f B, Â = %.2f B",
		sh[0], sh[1], sh[2], sh[3], total/1e3, total/B, s.MaxMeasured()/B)
	for i, want := range []float64{10, 20, 30, 40} {
		if math.Abs(sh[i]-want) > 2 {
			t.Errorf("client %s: share %.2f %%, want %g ± 2", names[i], sh[i], want)
		}
	}
	if math.Abs(total/B-1) > 0.1 {
		t.Errorf("total %.3f B, want within 10 %% of B", total/B)
	}
	_, total2 := sharesOf(two)
	t.Logf("a, b idle: c %.1f KB/s (%.2f of its allocation), d %.1f KB/s (%.2f), total %.1f KB/s = %.3f B",
		two[2]/1e3, two[2]/(0.3*B), two[3]/1e3, two[3]/(0.4*B), total2/1e3, total2/B)
	if two[2] < 1.15*0.3*B || two[3] < 1.15*0.4*B || total2 < 0.85*B || total2 > 1.1*B {
		t.Errorf("slack not taken up: c %.3f B, d %.3f B (allocations 0.3 B, 0.4 B), total %.3f B", two[2]/B, two[3]/B, total2/B)
	}
	if f := clients.Failures(); f > 0 {
		t.Errorf("%d requests failed or were rejected", f)
	}
	srv.Close() // waits for every handler to return
	snap := s.Snapshot()
	for _, c := range snap.Clients {
		if c.Standby != 0 {
			t.Errorf("%s still holds %d standby slots", c.Name, c.Standby)
		}
	}
}
