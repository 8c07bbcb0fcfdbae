// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice"
)

// A Kind travels as its name (the cluster's reports carry "kind":
// "rate"), and an unknown name is refused.
func TestKindText(t *testing.T) {
	for k := sluice.KindNone; k <= sluice.KindQuality; k++ {
		b, err := json.Marshal(struct{ Kind sluice.Kind }{k})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"Kind":"` + k.String() + `"}`; string(b) != want {
			t.Errorf("%v: %s, want %s", k, b, want)
		}
		var back struct{ Kind sluice.Kind }
		if err := json.Unmarshal(b, &back); err != nil || back.Kind != k {
			t.Errorf("%s: back %v, %v", b, back.Kind, err)
		}
	}
	var k sluice.Kind
	if err := k.UnmarshalText([]byte("speed")); err == nil {
		t.Error("an unknown kind was accepted")
	}
	if _, err := sluice.Kind(99).MarshalText(); err == nil {
		t.Error("an out-of-range kind was marshalled")
	}
}
