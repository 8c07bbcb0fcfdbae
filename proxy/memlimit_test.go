// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"runtime/debug"
	"testing"

	"github.com/sluicehq/sluice/proxy/overload"
)

// The proxy sets the soft memory limit from max_memory_bytes while it
// serves and puts the process's back when it stops; never when the
// environment sets GOMEMLIMIT.
func TestSoftMemoryLimitSet(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	want := int64(overload.SoftLimitHeadroom + 48<<20)
	for _, env := range []string{"", "1GiB", "off"} {
		t.Run("GOMEMLIMIT="+env, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", env) // read at start by the proxy, not by the runtime (started already)
			p := startProxy(t, bufConfig("http://127.0.0.1:1", "  max_memory_bytes: 50331648\n"))
			if env == "" {
				eventually(t, "the limit set from max_memory_bytes", func() bool { return debug.SetMemoryLimit(-1) == want })
			} else {
				_ = p.state(t) // serving
				if got := debug.SetMemoryLimit(-1); got != orig {
					t.Fatalf("GOMEMLIMIT=%s: the limit became %d", env, got)
				}
			}
			p.cancel()
			err := <-p.done
			p.done <- err // for the cleanup
			if got := debug.SetMemoryLimit(-1); got != orig {
				t.Fatalf("after stop: limit %d, want the process's %d", got, orig)
			}
		})
	}
}
