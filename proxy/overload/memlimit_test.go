// SPDX-License-Identifier: Apache-2.0

package overload

import (
	"testing"

	"github.com/sluicehq/sluice/proxy/buffer"
)

func TestSoftMemoryLimitOf(t *testing.T) {
	on := buffer.Policy{On: true, MaxMem: 64 << 20, ConnMem: 48 << 10}
	for _, tc := range []struct {
		name  string
		p     buffer.Policy
		conns int64
		want  int64
	}{
		{"automatic, few connections: the budget", on, 10, SoftLimitHeadroom + 64<<20},
		{"automatic, connections beyond the budget", on, 2000, SoftLimitHeadroom + 2000*48<<10},
		{"connections not counted", buffer.Policy{On: true, MaxMem: 64 << 20, ConnMem: -1}, 5000, SoftLimitHeadroom + 64<<20},
		{"set", buffer.Policy{On: true, MaxMem: 64 << 20, SoftMem: 200 << 20}, 5000, 200 << 20},
		{"none", buffer.Policy{On: true, MaxMem: 64 << 20, SoftMem: -1}, 10, -1},
		{"buffering off", buffer.Policy{MaxMem: 64 << 20}, 10, -1},
	} {
		if got := SoftMemoryLimit(&tc.p, tc.conns); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
