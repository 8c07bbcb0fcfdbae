// SPDX-License-Identifier: Apache-2.0

//go:build linux

package nft

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/policer/nft/nfttest"
)

// TestMain doubles as the helper process of TestCrashLeavesNoTable: with
// SLUICE_NFT_HELPER set it opens a table, prints its name and waits to be
// killed.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_NFT_HELPER") == "probe" {
		// Without CAP_NET_ADMIN (TestWithoutCapability): report Open's error.
		_, err := Open(Config{Listeners: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9")}, Rate: 5, Burst: 1})
		fmt.Printf("unsupported=%v err=%v\n", errors.Is(err, ErrUnsupported), err)
		os.Exit(0)
	}
	if os.Getenv("SLUICE_NFT_HELPER") != "" {
		t, err := Open(Config{Listeners: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9")}, Rate: 5, Burst: 1})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
		fmt.Println(t.Name())
		time.Sleep(time.Minute)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// open opens a table or skips the test when the kernel path is not
// available here, saying why; the table is deleted when the test ends.
func open(t *testing.T, cfg Config) *Table {
	t.Helper()
	tb, err := Open(cfg)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("kernel path unavailable: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Error(err)
		}
	})
	return tb
}

// tableNames returns the names of the inet tables (TableNames).
func tableNames(t *testing.T) []string {
	t.Helper()
	names, err := TableNames()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// limitOf reads the table's limit object back from the kernel.
func limitOf(t *testing.T, tb *Table) *expr.Limit {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.GetObject(&nftables.NamedObj{Table: tb.table, Name: limitName, Type: nftables.ObjTypeLimit})
	if err != nil {
		t.Fatalf("reading the limit of %s: %v", tb.Name(), err)
	}
	l, ok := o.(*nftables.NamedObj).Obj.(*expr.Limit)
	if !ok {
		t.Fatalf("limit object is %T", o.(*nftables.NamedObj).Obj)
	}
	return l
}

func rulesOf(t *testing.T, tb *Table, chain ...*nftables.Chain) []*nftables.Rule {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	ch := tb.chain
	if len(chain) > 0 {
		ch = chain[0]
	}
	rs, err := c.GetRules(tb.table, ch)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestOpenSetRateClose(t *testing.T) {
	lns := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:18080"), netip.MustParseAddrPort("[::]:18081"), netip.MustParseAddrPort("0.0.0.0:18082")}
	tb := open(t, Config{Listeners: lns, Rate: 1000, Burst: 20})
	if !slices.Contains(tableNames(t), tb.Name()) {
		t.Fatalf("table %s not in the kernel", tb.Name())
	}
	if n := len(rulesOf(t, tb)); n != len(lns) {
		t.Fatalf("%d rules, want one per listener (%d)", n, len(lns))
	}
	if l := limitOf(t, tb); l.Rate != 1000 || l.Unit != expr.LimitTimeSecond || l.Burst != 20 || !l.Over {
		t.Fatalf("limit %+v, want 1000/second burst 20 over", l)
	}
	// A rate change is read back from the kernel; a fractional rate is
	// kept per minute.
	for _, c := range []struct {
		rate float64
		want uint64
		unit expr.LimitTime
	}{{437, 437, expr.LimitTimeSecond}, {12.5, 750, expr.LimitTimeMinute}, {10, 10, expr.LimitTimeSecond}} {
		if err := tb.SetRate(c.rate); err != nil {
			t.Fatal(err)
		}
		if l := limitOf(t, tb); l.Rate != c.want || l.Unit != c.unit || l.Burst != 20 {
			t.Fatalf("after SetRate(%g): limit %+v, want %d per %v", c.rate, l, c.want, c.unit)
		}
		if n := len(rulesOf(t, tb)); n != len(lns) {
			t.Fatalf("after SetRate(%g): %d rules", c.rate, n)
		}
	}
	// 0 drops every SYN, +Inf none: no limit object, the rules stay.
	for _, r := range []float64{0, math.Inf(1), 55} {
		if err := tb.SetRate(r); err != nil {
			t.Fatal(err)
		}
		if n := len(rulesOf(t, tb)); n != len(lns) {
			t.Fatalf("after SetRate(%g): %d listener rules", r, n)
		}
		gs := rulesOf(t, tb, tb.global)
		if math.IsInf(r, 1) {
			if len(gs) != 0 {
				t.Fatalf("after SetRate(+Inf): %d global rules, want none", len(gs))
			}
			continue
		}
		if len(gs) != 1 {
			t.Fatalf("after SetRate(%g): %d global rules", r, len(gs))
		}
		last, _ := gs[0].Exprs[len(gs[0].Exprs)-1].(*expr.Verdict)
		o, _ := gs[0].Exprs[0].(*expr.Objref)
		limited := o != nil && o.Type == int(nftables.ObjTypeLimit)
		if last == nil || last.Kind != expr.VerdictDrop || limited != (r > 0) {
			t.Fatalf("after SetRate(%g): global rule %v", r, gs[0].Exprs)
		}
	}
	if got := limitOf(t, tb).Rate; got != 55 {
		t.Fatalf("limit rate %d after SetRate(55)", got)
	}
	if err := tb.SetRate(-1); err == nil {
		t.Fatal("SetRate(-1) accepted")
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(tableNames(t), tb.Name()) {
		t.Fatalf("table %s still in the kernel after Close", tb.Name())
	}
	if err := tb.SetRate(5); err == nil {
		t.Fatal("SetRate after Close accepted")
	}
}

// TestCrashLeavesNoTable: a process killed with its table installed
// leaves the table behind; the next Open deletes it, and leaves tables
// that are not a dead sluice's alone.
func TestCrashLeavesNoTable(t *testing.T) {
	probe := open(t, Config{Listeners: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9")}, Rate: 1, Burst: 1})
	_ = probe
	// A table that is not sluice's, and one named like sluice's but not
	// by this package: both must survive.
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	foreign := []*nftables.Table{
		{Name: "notsluice_test", Family: nftables.TableFamilyINet},
		{Name: TablePrefix + "custom", Family: nftables.TableFamilyINet},
	}
	for _, f := range foreign {
		c.AddTable(f)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range foreign {
			c.DelTable(f)
		}
		_ = c.Flush()
	})

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SLUICE_NFT_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimSpace(line)
	if !strings.HasPrefix(name, TablePrefix) {
		t.Fatalf("helper: %s", name)
	}
	t.Cleanup(func() { // even if the test fails before the restart
		c.DelTable(&nftables.Table{Name: name, Family: nftables.TableFamilyINet})
		_ = c.Flush()
	})
	// While the helper lives, its table is not stale.
	if removed, err := RemoveStale(); err != nil || slices.Contains(removed, name) {
		t.Fatalf("RemoveStale with the helper alive: %v, %v", removed, err)
	}
	if err := cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !slices.Contains(tableNames(t), name) {
		t.Fatalf("the killed helper's table %s is gone already: the test proves nothing", name)
	}
	// The restart: Open cleans up.
	open(t, Config{Listeners: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9")}, Rate: 1, Burst: 1})
	names := tableNames(t)
	if slices.Contains(names, name) {
		t.Fatalf("stale table %s survived a restart", name)
	}
	for _, f := range foreign {
		if !slices.Contains(names, f.Name) {
			t.Fatalf("table %s, not a dead sluice's, was removed", f.Name)
		}
	}
	if !slices.Contains(names, probe.Name()) {
		t.Fatalf("this live process's table %s was removed", probe.Name())
	}
}

// TestSYNFlood: a real SYN burst against a loopback listener; the kernel
// admits about Burst + Rate·elapsed of them and counts the rest dropped.
func TestSYNFlood(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const rate, burst, n = 20, 5, 300
	tb := open(t, Config{Listeners: []netip.AddrPort{ln.Addr().(*net.TCPAddr).AddrPort()}, Rate: rate, Burst: burst})
	accepted := make(chan int)
	go func() {
		k := 0
		for {
			c, err := ln.Accept()
			if err != nil {
				accepted <- k
				return
			}
			k++
			c.Close()
		}
	}()
	start := time.Now()
	fds := nfttest.SYNBurst(t, ln.Addr().(*net.TCPAddr).AddrPort(), n)
	time.Sleep(200 * time.Millisecond) // let the handshakes that passed complete
	elapsed := time.Since(start)
	for _, fd := range fds {
		unix.Close(fd)
	}
	cnt, err := tb.Counters()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	got := <-accepted
	limit := burst + int(math.Ceil(rate*elapsed.Seconds())) + 1
	t.Logf("%d SYNs in %v: %d offered, %d dropped, %d accepted (at most %d)", n, elapsed, cnt.Offered, cnt.Dropped, got, limit)
	if cnt.Offered < n {
		t.Errorf("offered %d < %d SYNs sent", cnt.Offered, n)
	}
	if cnt.Dropped < uint64(n-limit) || cnt.Dropped > cnt.Offered {
		t.Errorf("dropped %d of %d offered, want at least %d", cnt.Dropped, cnt.Offered, n-limit)
	}
	if got > limit || got < 1 {
		t.Errorf("accepted %d connections, want within [1, %d]", got, limit)
	}
}

func TestKernelRate(t *testing.T) {
	for _, c := range []struct {
		in         float64
		rate, unit uint64
		ok         bool
	}{{1000, 1000, 1, true}, {10, 10, 1, true}, {12.5, 750, 60, true}, {0.01, 36, 3600, true}, {0, 0, 0, false}, {math.Inf(1), 0, 0, false}, {1e-9, 1, 3600, true}} {
		r, u, ok := kernelRate(c.in)
		if r != c.rate || u != c.unit || ok != c.ok {
			t.Errorf("kernelRate(%g) = %d/%ds %v, want %d/%ds %v", c.in, r, u, ok, c.rate, c.unit, c.ok)
		}
	}
	if _, _, ok := parseName(TablePrefix + "custom"); ok {
		t.Error("parseName accepted a name not of this package")
	}
	if p, s, ok := parseName(TablePrefix + "12_345_1"); !ok || p != 12 || s != 345 {
		t.Errorf("parseName: %d %d %v", p, s, ok)
	}
}

// TestWithoutCapability: a process without CAP_NET_ADMIN gets an error
// wrapping ErrUnsupported that says what is missing (the caller then keeps
// the user-space reset). The helper runs under setpriv with the capability
// dropped.
func TestWithoutCapability(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	cmd := exec.Command(setpriv, "--bounding-set=-net_admin", "--inh-caps=-net_admin", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SLUICE_NFT_HELPER=probe")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("cannot drop the capability here: %v: %s", err, out)
	}
	got := strings.TrimSpace(string(out))
	if !strings.Contains(got, "unsupported=true") || !strings.Contains(got, "CAP_NET_ADMIN") {
		t.Fatalf("without CAP_NET_ADMIN: %s; want an ErrUnsupported naming the capability", got)
	}
}

// TestSourcePrefixes: a SYN from a denied prefix is dropped by its rule
// (counted as a source drop), a longer prefix inside it that is exempt
// passes, and an unlisted source meets only the global limit.
func TestSourcePrefixes(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).AddrPort().Port()
	tb := open(t, Config{Listeners: []netip.AddrPort{ln.Addr().(*net.TCPAddr).AddrPort()}, Rate: 1000, Burst: 20,
		Sources: []Source{
			{Prefix: netip.MustParsePrefix("127.0.0.0/24"), Rate: 0},
			{Prefix: netip.MustParsePrefix("127.0.0.1/32"), Rate: math.Inf(1)},
			{Prefix: netip.MustParsePrefix("127.0.0.9/32"), Rate: 2, Burst: 1},
		}})
	dial := func(src string) error {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 300 * time.Millisecond}
		c, err := d.Dial("tcp", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String())
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial("127.0.0.1"); err != nil {
		t.Errorf("exempt /32 inside a denied /24: %v", err)
	}
	if err := dial("127.0.0.7"); err == nil {
		t.Error("denied prefix: connected")
	}
	if err := dial("127.0.1.5"); err != nil {
		t.Errorf("unlisted source: %v", err)
	}
	// 127.0.0.9: a bucket of 1 at 2/s: the first passes, an immediate
	// second is dropped (its retransmission is after the 300 ms timeout).
	if err := dial("127.0.0.9"); err != nil {
		t.Errorf("limited source, first connection: %v", err)
	}
	if err := dial("127.0.0.9"); err == nil {
		t.Error("limited source, second connection at once: connected")
	}
	c, err := tb.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.DroppedSource < 2 || c.Dropped != 0 {
		t.Errorf("counters %+v: want ≥ 2 source drops, no global drop", c)
	}
	// A rate change leaves the source rules in place.
	if err := tb.SetRate(500); err != nil {
		t.Fatal(err)
	}
	if err := dial("127.0.0.7"); err == nil {
		t.Error("denied prefix after SetRate: connected")
	}
	if err := dial("127.0.0.1"); err != nil {
		t.Errorf("exempt after SetRate: %v", err)
	}
}
