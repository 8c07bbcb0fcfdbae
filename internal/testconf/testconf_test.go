// SPDX-License-Identifier: Apache-2.0

package testconf

import (
	"strings"
	"testing"
)

func TestBase(t *testing.T) {
	got := Base("http://127.0.0.1:9", "stages: []\n")
	if !strings.Contains(got, "    - url: http://127.0.0.1:9\n") || strings.Contains(got, "BACKEND") {
		t.Errorf("backend not substituted:\n%s", got)
	}
	if lines := strings.Split(got, "\n"); lines[7] != "stages: []" {
		t.Errorf("extra on line %q, want line 8:\n%s", lines[7], got)
	}
}
