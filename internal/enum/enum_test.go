// SPDX-License-Identifier: Apache-2.0

package enum

import "testing"

type color uint8

var colorNames = [...]string{1: "red", 2: "green"}

func TestName(t *testing.T) {
	for _, tt := range []struct {
		v    color
		want string
	}{{1, "red"}, {2, "green"}, {0, "color(0)"}, {3, "color(3)"}, {255, "color(255)"}} {
		if got := Name(tt.v, colorNames[:], "color"); got != tt.want {
			t.Errorf("Name(%d) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
