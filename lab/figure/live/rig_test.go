// SPDX-License-Identifier: Apache-2.0

package live

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestListenOverflows reads the counter from the TcpExt lines of a
// /proc/net/netstat file, and says when it cannot.
func TestListenOverflows(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "netstat")
	text := "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 435792 435800\nIpExt: InNoRoutes\nIpExt: 0\n"
	if err := os.WriteFile(good, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, ok := listenOverflows(good); !ok || v != 435792 {
		t.Errorf("got %d, %v; want 435792", v, ok)
	}
	bad := filepath.Join(dir, "other")
	if err := os.WriteFile(bad, []byte("TcpExt: SyncookiesSent\nTcpExt: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := listenOverflows(bad); ok {
		t.Error("a file without ListenOverflows read as known")
	}
	if _, ok := listenOverflows(filepath.Join(dir, "missing")); ok {
		t.Error("a missing file read as known")
	}
	if runtime.GOOS == "linux" {
		if _, ok := listenOverflows("/proc/net/netstat"); !ok {
			t.Error("/proc/net/netstat has no ListenOverflows")
		}
	}
}

// TestRigBetween: cores are CPU time over wall time; unknown overflows
// stay NaN.
func TestRigBetween(t *testing.T) {
	t0 := time.Unix(100, 0)
	a := rigSample{at: t0, cpu: time.Second, overflows: 10, ok: true}
	b := rigSample{at: t0.Add(2 * time.Second), cpu: 4 * time.Second, overflows: 25, ok: true}
	if u := rigBetween(a, b); u.cores != 1.5 || u.overflows != 15 {
		t.Errorf("%+v, want 1.5 cores and 15 overflows", u)
	}
	b.ok = false
	if u := rigBetween(a, b); !math.IsNaN(u.overflows) {
		t.Errorf("overflows %v with an unknown sample, want NaN", u.overflows)
	}
	if runtime.GOOS == "linux" {
		if cpu, ok := rigCPU(); !ok || cpu <= 0 {
			t.Errorf("rigCPU: %v, %v", cpu, ok)
		}
	}
}
