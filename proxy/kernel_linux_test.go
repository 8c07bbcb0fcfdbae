// SPDX-License-Identifier: Apache-2.0

//go:build linux

package proxy

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/policer/nft"
	"github.com/sluicehq/sluice/policer/nft/nfttest"
)

// TestPolicerKernelPath: with policer.kernel auto, as root on Linux, the
// policer's rate is enforced by an nftables table of sluice's own: a real
// SYN burst against the client listener is mostly dropped by the kernel
// (counted in /state and /metrics), an admitted connection is served, and
// the table is gone when the server stops.
func TestPolicerKernelPath(t *testing.T) {
	b := okBackend(t)
	p := startManual(t, baseConfig(b.URL, "policer:\n  rate: 5\n  burst: 3\n  controller: none\n"))
	st := p.state(t).Policer
	name, ok := strings.CutPrefix(st.Path, "kernel: nftables table inet ")
	if !ok {
		t.Skipf("kernel path not in force: %s", st.Path)
	}
	if !inKernel(t, name) {
		t.Fatalf("table %s not in the kernel", name)
	}
	if code, _, body := get(t, p.url+"/", nil); code != 200 || body != "ok" {
		t.Fatalf("an admitted connection: %d %q", code, body)
	}
	const n = 100
	fds := nfttest.SYNBurst(t, p.srv.Addrs()[0].(*net.TCPAddr).AddrPort(), n)
	time.Sleep(300 * time.Millisecond)
	for _, fd := range fds {
		unix.Close(fd)
	}
	st = p.state(t).Policer
	// At most burst + rate·elapsed (+1 for the GET above) pass the kernel.
	if st.RejectedKernel < n-10 || st.RejectedRate != 0 {
		t.Errorf("policer %+v: want ≥ %d SYNs dropped in the kernel, none reset in user space", st, n-10)
	}
	_, _, m := get(t, p.admin+"/metrics", nil)
	if !strings.Contains(m, `proxy_policer_rejected_total{reason="kernel"}`) {
		t.Errorf("/metrics lacks the kernel's drops:\n%s", grepLines(m, "proxy_policer"))
	}
	p.cancel()
	err := <-p.done
	p.done <- err // for the cleanup's wait
	if inKernel(t, name) {
		t.Fatalf("table %s left behind after the server stopped", name)
	}
}

// TestPolicerKernelSourceRule: a per-prefix rule goes to the kernel too:
// a SYN from the denied source gets no answer and is counted as a kernel
// drop, another source is served.
func TestPolicerKernelSourceRule(t *testing.T) {
	b := okBackend(t)
	p := startManual(t, strings.Replace(baseConfig(b.URL, `policer:
  controller: none
  sources:
    rules:
      - {prefix: 127.0.0.7, rate: 0}
`), "127.0.0.1:0", "0.0.0.0:0", 1))
	if st := p.state(t).Policer; !strings.HasPrefix(st.Path, "kernel:") {
		t.Skipf("kernel path not in force: %s", st.Path)
	}
	port := p.addr[strings.LastIndexByte(p.addr, ':'):]
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 7)}, Timeout: 300 * time.Millisecond}
	if c, err := d.Dial("tcp", "127.0.0.1"+port); err == nil {
		c.Close()
		t.Fatal("denied source connected")
	}
	if code, _, _ := get(t, "http://127.0.0.1"+port+"/", nil); code != 200 {
		t.Fatalf("allowed source: %d", code)
	}
	if st := p.state(t).Policer; st.RejectedKernel < 1 || st.RejectedSource != 0 || st.Admitted != 1 {
		t.Errorf("policer %+v, want the denied SYN dropped in the kernel, 1 admitted", st)
	}
}

// inKernel reports whether the kernel holds the inet table name.
func inKernel(t *testing.T, name string) bool {
	t.Helper()
	names, err := nft.TableNames()
	must(t, err)
	return slices.Contains(names, name)
}
