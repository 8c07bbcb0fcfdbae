// SPDX-License-Identifier: Apache-2.0

package control_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control"
	"github.com/sluicehq/sluice/control/auto"
)

// A Go literal with only the fields that matter works: WithDefaults
// gives every field left at zero, where zero is not a valid setting, its
// default. The empty literal of every controller is then as valid as its
// default configuration, and the caller's value is not modified.
func TestWithDefaults(t *testing.T) {
	for _, name := range control.Names() {
		def, _ := control.NewConfig(name)
		zero := reflect.New(reflect.TypeOf(def).Elem()).Interface().(control.Config)
		got := control.WithDefaults(zero)
		if (got.Validate() == nil) != (def.Validate() == nil) {
			t.Errorf("%s: the empty literal with defaults: %v; the default configuration: %v", name, got.Validate(), def.Validate())
		}
		if !reflect.ValueOf(zero).Elem().IsZero() {
			t.Errorf("%s: the caller's value was modified", name)
		}
	}
	got := control.WithDefaults(&auto.Config{SLO: 250 * time.Millisecond}).(*auto.Config)
	want := auto.DefaultConfig()
	want.SLO = 250 * time.Millisecond
	want.Knee, want.KneeTolerance = "", 0 // valid zeros: kept
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("auto told an SLO:\n got %+v\nwant %+v", *got, want)
	}
	// A bool's false and a zero that is a valid setting are kept.
	seda := control.WithDefaults(&control.SEDAConfig{Target: time.Second}).(*control.SEDAConfig)
	if seda.TrackDemand || seda.NReq != control.DefaultSEDAConfig().NReq {
		t.Errorf("seda: track_demand %v, nreq %d", seda.TrackDemand, seda.NReq)
	}
	vq := control.WithDefaults(&control.VoigtQueueConfig{QRef: 100}).(*control.VoigtQueueConfig)
	if vq.Kd != 0 || vq.Period != control.DefaultVoigtQueueConfig().Period {
		t.Errorf("voigt-queue: kd %v (a valid zero), period %v", vq.Kd, vq.Period)
	}
	if control.WithDefaults(nil) != nil {
		t.Error("nil is not nil")
	}
}
