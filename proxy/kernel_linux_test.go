//go:build linux

package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// TestPolicerKernelPath: with policer.kernel auto, as root on Linux, the
// policer's rate is enforced by an nftables table of sluice's own: a real
// SYN burst against the client listener is mostly dropped by the kernel
// (counted in /state and /metrics), an admitted connection is served, and
// the table is gone when the server stops.
func TestPolicerKernelPath(t *testing.T) {
	b := backend(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	p := startManual(t, baseConfig(b.URL, "policer:\n  rate: 5\n  burst: 3\n  controller: none\n"))
	st := p.state(t).Policer
	name, ok := strings.CutPrefix(st.Path, "kernel: nftables table inet ")
	if !ok {
		t.Skipf("kernel path not in force: %s", st.Path)
	}
	if !slices.Contains(inetTables(t), name) {
		t.Fatalf("table %s not in the kernel", name)
	}
	if code, _, body := get(t, p.url+"/", nil); code != 200 || body != "ok" {
		t.Fatalf("an admitted connection: %d %q", code, body)
	}
	const n = 100
	a := p.srv.Addrs()[0].(*net.TCPAddr).AddrPort()
	sa := &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().As4()}
	var fds []int
	for range n {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		if err := unix.Connect(fd, sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
			t.Fatal(err)
		}
	}
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
	if slices.Contains(inetTables(t), name) {
		t.Fatalf("table %s left behind after the server stopped", name)
	}
}

func inetTables(t *testing.T) []string {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range ts {
		out = append(out, x.Name)
	}
	return out
}
