// SPDX-License-Identifier: Apache-2.0

package policytest

import "testing"

// A policy file is read strictly and built.
func TestNew(t *testing.T) {
	p := New(t, "stages: [{name: api, controller: static-rate, params: {rate: 10}}]")
	if p.Stage("api") == nil {
		t.Fatal("the stage was not built")
	}
}
