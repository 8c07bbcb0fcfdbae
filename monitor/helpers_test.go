// SPDX-License-Identifier: Apache-2.0

package monitor

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stage copies fixture files into dir: files maps a destination relative
// to dir to a source relative to testdata. It lets a test show a reader
// the same path at two moments.
func stage(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for dst, src := range files {
		data, err := os.ReadFile(filepath.Join("testdata", src))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, dst)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeFile writes content to dir/name.
func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantErr fails unless err is non-nil and contains every fragment.
func wantErr(t *testing.T, what string, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one containing %q", what, fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s: error %q does not contain %q", what, err, f)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// wantUtilization fails t unless s.Utilization(now) returns want (within
// 1e-9) and no error; what names the reading.
func wantUtilization(t *testing.T, what string, s UtilizationSource, now time.Time, want float64) {
	t.Helper()
	if got, err := s.Utilization(now); err != nil || !near(got, want) {
		t.Errorf("%s: Utilization = %v, %v; want %v", what, got, err, want)
	}
}

// wantNoTimeElapsed fails t unless s.Utilization(now) returns an error
// wrapping ErrNoTimeElapsed; what names the reading.
func wantNoTimeElapsed(t *testing.T, what string, s UtilizationSource, now time.Time) {
	t.Helper()
	if _, err := s.Utilization(now); !errors.Is(err, ErrNoTimeElapsed) {
		t.Errorf("%s: err = %v, want ErrNoTimeElapsed", what, err)
	}
}
