// SPDX-License-Identifier: Apache-2.0

//go:build linux

package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Names of the objects inside a table.
const (
	chainName         = "syn"
	globalChain       = "global"
	srcChain          = "src"
	limitName         = "rate"
	offeredName       = "offered"
	droppedName       = "dropped"
	droppedSourceName = "dropped_source"
)

var seq atomic.Uint64 // tables opened by this process

// Table is an nftables table of sluice's own enforcing a connection
// policer's rate on its listeners' SYNs (see the package comment). Its
// methods are safe for concurrent use.
type Table struct {
	mu     sync.Mutex
	conn   *nftables.Conn
	table  *nftables.Table
	chain  *nftables.Chain // the base chain: one rule per listener
	global *nftables.Chain // the global limit
	cfg    Config
	rate   float64 // in force
	closed bool
}

// Open removes the stale tables of dead processes (RemoveStale), then
// creates a table policing cfg's listeners at cfg.Rate. An error wraps
// ErrUnsupported when the kernel refuses for want of nf_tables or
// CAP_NET_ADMIN.
func Open(cfg Config) (*Table, error) {
	if cfg.Burst < 1 {
		return nil, fmt.Errorf("nft: burst %d must be >= 1", cfg.Burst)
	}
	if math.IsNaN(cfg.Rate) || cfg.Rate < 0 {
		return nil, fmt.Errorf("nft: rate %v must be >= 0", cfg.Rate)
	}
	if len(cfg.Listeners) == 0 {
		return nil, errors.New("nft: no listener to police")
	}
	for _, l := range cfg.Listeners {
		if !l.IsValid() || l.Port() == 0 {
			return nil, fmt.Errorf("nft: listener address %v is not a bound address and port", l)
		}
	}
	for _, src := range cfg.Sources {
		if !src.Prefix.IsValid() || src.Prefix != src.Prefix.Masked() {
			return nil, fmt.Errorf("nft: source prefix %v is not a masked prefix", src.Prefix)
		}
		if math.IsNaN(src.Rate) || src.Rate < 0 {
			return nil, fmt.Errorf("nft: source %v: rate %v must be >= 0", src.Prefix, src.Rate)
		}
		if _, _, limited := kernelRate(src.Rate); limited && src.Burst < 1 {
			return nil, fmt.Errorf("nft: source %v: burst %d must be >= 1", src.Prefix, src.Burst)
		}
	}
	c, err := nftables.New()
	if err != nil {
		return nil, unsupported("netlink socket", err)
	}
	if _, err := RemoveStale(); err != nil {
		return nil, err
	}
	start, err := startTime(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("nft: %w", err)
	}
	name := fmt.Sprintf("%s%d_%d_%d", TablePrefix, os.Getpid(), start, seq.Add(1))
	t := &Table{conn: c, cfg: cfg, rate: cfg.Rate,
		table: &nftables.Table{Name: name, Family: nftables.TableFamilyINet}}
	c.CreateTable(t.table)
	t.chain = c.AddChain(&nftables.Chain{
		Name: chainName, Table: t.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRaw,
	})
	t.global = c.AddChain(&nftables.Chain{Name: globalChain, Table: t.table})
	for _, n := range []string{offeredName, droppedName, droppedSourceName} {
		c.AddObj(&nftables.NamedObj{Table: t.table, Name: n, Type: nftables.ObjTypeCounter, Obj: &expr.Counter{}})
	}
	next := globalChain
	if len(cfg.Sources) > 0 {
		t.addSources()
		next = srcChain
	}
	for _, l := range cfg.Listeners {
		e := append(matchListener(l),
			&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: offeredName},
			&expr.Verdict{Kind: expr.VerdictGoto, Chain: next})
		c.AddRule(&nftables.Rule{Table: t.table, Chain: t.chain, Exprs: e})
	}
	t.addGlobal(cfg.Rate)
	if err := c.Flush(); err != nil {
		// The batch is atomic: nothing was created.
		return nil, unsupported("creating table "+name, err)
	}
	return t, nil
}

// unsupported wraps ErrUnsupported for a permission or missing-subsystem
// error, and reports any other as it is.
func unsupported(what string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%w: %s: %v (needs CAP_NET_ADMIN)", ErrUnsupported, what, err)
	}
	if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EAFNOSUPPORT) {
		return fmt.Errorf("%w: %s: %v (kernel without nf_tables?)", ErrUnsupported, what, err)
	}
	return fmt.Errorf("nft: %s: %w", what, err)
}

// addGlobal queues the global limit object (when the rate needs one) and
// the global chain's rule at rate r.
func (t *Table) addGlobal(r float64) {
	krate, unit, limited := kernelRate(r)
	var e []expr.Any
	switch {
	case limited:
		t.conn.AddObj(&nftables.NamedObj{Table: t.table, Name: limitName, Type: nftables.ObjTypeLimit,
			Obj: &expr.Limit{Type: expr.LimitTypePkts, Rate: krate, Over: true, Unit: limitUnit(unit), Burst: uint32(t.cfg.Burst)}})
		e = append(e, &expr.Objref{Type: int(nftables.ObjTypeLimit), Name: limitName})
	case math.IsInf(r, 1):
		return // no limit: the SYN falls through
	}
	e = append(e,
		&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: droppedName},
		&expr.Verdict{Kind: expr.VerdictDrop})
	t.conn.AddRule(&nftables.Rule{Table: t.table, Chain: t.global, Exprs: e})
}

// addSources queues the per-source chains: "src" dispatches a SYN to the
// chain of the longest prefix holding its source address, or to global.
func (t *Table) addSources() {
	src := t.conn.AddChain(&nftables.Chain{Name: srcChain, Table: t.table})
	order := make([]int, len(t.cfg.Sources))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return t.cfg.Sources[order[a]].Prefix.Bits() > t.cfg.Sources[order[b]].Prefix.Bits()
	})
	for _, i := range order {
		so := t.cfg.Sources[i]
		name := fmt.Sprintf("%s_%d", srcChain, i)
		ch := t.conn.AddChain(&nftables.Chain{Name: name, Table: t.table})
		krate, unit, limited := kernelRate(so.Rate)
		var e []expr.Any
		switch {
		case limited:
			t.conn.AddObj(&nftables.NamedObj{Table: t.table, Name: name, Type: nftables.ObjTypeLimit,
				Obj: &expr.Limit{Type: expr.LimitTypePkts, Rate: krate, Over: true, Unit: limitUnit(unit), Burst: uint32(so.Burst)}})
			e = append(e, &expr.Objref{Type: int(nftables.ObjTypeLimit), Name: name})
			fallthrough
		case so.Rate == 0:
			e = append(e,
				&expr.Objref{Type: int(nftables.ObjTypeCounter), Name: droppedSourceName},
				&expr.Verdict{Kind: expr.VerdictDrop})
			t.conn.AddRule(&nftables.Rule{Table: t.table, Chain: ch, Exprs: e})
		}
		t.conn.AddRule(&nftables.Rule{Table: t.table, Chain: ch, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: globalChain}}})
		m := append(matchSource(so.Prefix), &expr.Verdict{Kind: expr.VerdictGoto, Chain: name})
		t.conn.AddRule(&nftables.Rule{Table: t.table, Chain: src, Exprs: m})
	}
	t.conn.AddRule(&nftables.Rule{Table: t.table, Chain: src, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: globalChain}}})
}

// matchSource returns the expressions matching a packet whose source
// address is in p.
func matchSource(p netip.Prefix) []expr.Any {
	a := p.Addr()
	off, n, proto := uint32(12), 4, byte(unix.NFPROTO_IPV4)
	if a.Is6() && !a.Is4In6() {
		off, n, proto = 8, 16, unix.NFPROTO_IPV6
	}
	full := a.AsSlice()[len(a.AsSlice())-n:]
	mask := make([]byte, n)
	bits := p.Bits()
	if a.Is4In6() {
		bits -= 96
	}
	for i := range mask {
		switch {
		case bits >= 8:
			mask[i] = 0xff
			bits -= 8
		case bits > 0:
			mask[i] = byte(0xff << (8 - bits))
			bits = 0
		}
	}
	e := nfproto(proto)
	e = append(e, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(n)})
	if p.Bits() < 8*n {
		e = append(e, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(n), Mask: mask, Xor: make([]byte, n)})
	}
	return append(e, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: full})
}

func limitUnit(seconds uint64) expr.LimitTime {
	switch seconds {
	case 60:
		return expr.LimitTimeMinute
	case 3600:
		return expr.LimitTimeHour
	}
	return expr.LimitTimeSecond
}

// matchListener returns the expressions matching a SYN (SYN set, ACK
// clear) to the listener l.
func matchListener(l netip.AddrPort) []expr.Any {
	var e []expr.Any
	a := l.Addr().Unmap()
	switch {
	case a.IsUnspecified():
		if a.Is4() {
			e = append(e, nfproto(unix.NFPROTO_IPV4)...)
		}
		// fib daddr type local
		e = append(e,
			&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, unix.RTN_LOCAL)})
	case a.Is4():
		b := a.As4()
		e = append(e, nfproto(unix.NFPROTO_IPV4)...)
		e = append(e,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b[:]})
	default:
		b := a.As16()
		e = append(e, nfproto(unix.NFPROTO_IPV6)...)
		e = append(e,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b[:]})
	}
	port := binary.BigEndian.AppendUint16(nil, l.Port())
	return append(e,
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0x12}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x02}},
	)
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

// Name returns the table's name.
func (t *Table) Name() string { return t.table.Name }

// Rate returns the rate in force, SYNs per second.
func (t *Table) Rate() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rate
}

// SetRate puts rate r (SYNs per second, finite and ≥ 0, or +Inf) into
// force: when its kernel representation differs from the one in force, the
// global chain's rule and the limit object are replaced in one atomic
// batch (the listeners' rules and the source limits stay). On error
// the previous rate stays in force.
func (t *Table) SetRate(r float64) error {
	if math.IsNaN(r) || r < 0 {
		return fmt.Errorf("nft: rate %v must be >= 0", r)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("nft: table closed")
	}
	if same(t.rate, r) {
		t.rate = r
		return nil
	}
	t.conn.FlushChain(t.global)
	if _, _, limited := kernelRate(t.rate); limited {
		t.conn.DeleteObject(&nftables.NamedObj{Table: t.table, Name: limitName, Type: nftables.ObjTypeLimit})
	}
	t.addGlobal(r)
	if err := t.conn.Flush(); err != nil {
		return fmt.Errorf("nft: setting rate %g in %s: %w", r, t.table.Name, err)
	}
	t.rate = r
	return nil
}

// same reports whether rates a and b have the same kernel representation.
func same(a, b float64) bool {
	ra, ua, la := kernelRate(a)
	rb, ub, lb := kernelRate(b)
	if la != lb {
		return false
	}
	if !la {
		return math.IsInf(a, 1) == math.IsInf(b, 1)
	}
	return ra == rb && ua == ub
}

// Counters reads the table's counters from the kernel.
func (t *Table) Counters() (Counters, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out Counters
	for _, n := range []string{offeredName, droppedName, droppedSourceName} {
		o, err := t.conn.GetObject(&nftables.NamedObj{Table: t.table, Name: n, Type: nftables.ObjTypeCounter})
		if err != nil {
			return Counters{}, fmt.Errorf("nft: reading counter %s of %s: %w", n, t.table.Name, err)
		}
		no, ok := o.(*nftables.NamedObj)
		if !ok {
			return Counters{}, fmt.Errorf("nft: counter %s of %s: unexpected object %T", n, t.table.Name, o)
		}
		cnt, ok := no.Obj.(*expr.Counter)
		if !ok {
			return Counters{}, fmt.Errorf("nft: counter %s of %s: unexpected object %T", n, t.table.Name, no.Obj)
		}
		switch n {
		case offeredName:
			out.Offered = cnt.Packets
		case droppedName:
			out.Dropped = cnt.Packets
		default:
			out.DroppedSource = cnt.Packets
		}
	}
	return out, nil
}

// Close deletes the table. It is idempotent.
func (t *Table) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	t.conn.DelTable(t.table)
	if err := t.conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("nft: deleting %s: %w", t.table.Name, err)
	}
	return nil
}

// RemoveStale deletes every inet table named sluice_<pid>_<start>_<n>
// whose process is gone (no /proc/<pid>, or one started at another time:
// the pid was reused) and returns their names. Tables of live processes,
// this one's included, and tables named otherwise are left alone.
func RemoveStale() ([]string, error) {
	c, ts, err := inetTables()
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, t := range ts {
		pid, start, ok := parseName(t.Name)
		if !ok {
			continue
		}
		if st, err := startTime(pid); err == nil && st == start {
			continue // alive
		}
		c.DelTable(t)
		stale = append(stale, t.Name)
	}
	if len(stale) == 0 {
		return nil, nil
	}
	if err := c.Flush(); err != nil {
		return nil, unsupported("deleting stale tables", err)
	}
	return stale, nil
}

// TableNames returns the names of the inet tables in the kernel: this
// package's (TablePrefix…), live or stale, and any other's.
func TableNames() ([]string, error) {
	_, ts, err := inetTables()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names, nil
}

// inetTables opens a netlink connection and lists the inet tables through
// it.
func inetTables() (*nftables.Conn, []*nftables.Table, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, nil, unsupported("netlink socket", err)
	}
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, nil, unsupported("listing tables", err)
	}
	return c, ts, nil
}

// parseName reads pid and start time from a table name of this package.
func parseName(name string) (pid int, start uint64, ok bool) {
	rest, found := strings.CutPrefix(name, TablePrefix)
	if !found {
		return 0, 0, false
	}
	f := strings.Split(rest, "_")
	if len(f) != 3 {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(f[0])
	s, err2 := strconv.ParseUint(f[1], 10, 64)
	_, err3 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || p <= 0 {
		return 0, 0, false
	}
	return p, s, true
}

// startTime returns field 22 of /proc/<pid>/stat: the process's start
// time in clock ticks after boot.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); the start time is field 22.
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Dropped returns the number of SYNs the table dropped by the global
// limit and by the source limits; it makes a Table a policer.Kernel.
func (t *Table) Dropped() (global, source uint64, err error) {
	c, err := t.Counters()
	return c.Dropped, c.DroppedSource, err
}
