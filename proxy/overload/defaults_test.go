// SPDX-License-Identifier: Apache-2.0

package overload

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/policer"
	"github.com/sluicehq/sluice/share"
)

// TestFillZero: the zero fields take the default, nested structs field by
// field; set fields, NaN, slices and a default's own zero are left alone;
// −0 counts as zero, as with cmp.Or.
func TestFillZero(t *testing.T) {
	type inner struct {
		N int
		S string
	}
	type cfg struct {
		F     float64
		Neg   float64
		NaN   float64
		D     time.Duration
		U     uint
		B     bool
		Keep  int
		NoDef int
		In    inner
		L     []int
		P     *int
		priv  int
	}
	def := cfg{F: 1.5, Neg: 2, NaN: 3, D: time.Second, U: 4, B: true, Keep: 5, In: inner{N: 6, S: "x"}, L: []int{7}, priv: 8}
	got := cfg{Neg: math.Copysign(0, -1), NaN: math.NaN(), Keep: 9, In: inner{S: "y"}}
	fillZero(&got, def)
	if got.F != 1.5 || got.Neg != 2 || !math.IsNaN(got.NaN) || got.D != time.Second || got.U != 4 || !got.B ||
		got.Keep != 9 || got.NoDef != 0 || got.In != (inner{N: 6, S: "y"}) || got.L != nil || got.P != nil || got.priv != 0 {
		t.Errorf("filled %+v", got)
	}
}

// TestSectionDefaults: the policer's and the shares' defaults are their
// libraries' Default…Config but where the proxy decides otherwise (kd 0
// stays none, the controller starts from the bucket's rate, util_ref from
// the CPU rule, no reply_buffer), and a set field is kept.
func TestSectionDefaults(t *testing.T) {
	var p PolicerConfig
	p.Rate = 300
	p.setDefaults(70)
	q := control.DefaultVoigtQueueConfig()
	want := q
	want.Kd, want.InitialRate, want.UtilRef = 0, 300, 70
	if p.Control.VoigtQueueConfig != want || p.Burst != policer.DefaultBurst || p.Sources.MaxTracked != policer.DefaultMaxTracked ||
		p.Control.History != DefaultPolicerHistory {
		t.Errorf("policer: %+v control %+v", p.Config, p.Control)
	}
	var p2 PolicerConfig
	p2.setDefaults(0)
	if p2.Rate != policer.DefaultRate || p2.Control.InitialRate != policer.DefaultRate || p2.Control.UtilRef != q.UtilRef {
		t.Errorf("policer without a CPU rule: %+v control %+v", p2.Config, p2.Control)
	}
	s := share.Config{Alpha: 0.5}
	setShareDefaults(&s)
	ws := share.DefaultConfig()
	ws.Alpha, ws.ReplyBuffer = 0.5, 0
	if !reflect.DeepEqual(s, ws) {
		t.Errorf("shares: %+v\nwant %+v", s, ws)
	}
}
