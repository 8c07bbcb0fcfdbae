// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/internal/httpx"
)

// bufChunk is the unit of response-buffer memory and of a filler's reads
// from a backend: 32 KiB, the size of ReverseProxy's copy buffers, with
// which the chunks share their pool.
const bufChunk = copyBufferSize

// budgetRetry is how often a filler waiting for its client retries the
// memory and disk caps, which other responses may have freed meanwhile.
const budgetRetry = 100 * time.Millisecond

// parkAfter is how long after the backend's last byte a response's client
// may take to read what the response holds in memory; what it has not
// read by then moves to the response's temporary file (park).
const parkAfter = 200 * time.Millisecond

// tempPrefix starts the name of every temporary file: sluice-resp-PID-.
const tempPrefix = "sluice-resp-"

// HeaderAccelBuffering is the response header by which a backend asks
// that its response not be buffered ("no") or be buffered whatever the
// configuration excludes ("yes"); nginx reads the same header. It is
// passed on to the client.
const HeaderAccelBuffering = "X-Accel-Buffering"

// Why a response is not buffered (proxy_responses_unbuffered_total's
// reason), then where a buffered one was (proxy_responses_buffered_total's).
const (
	unbufStream = iota // an upgrade, event stream, gRPC, or long-lived response
	unbufHeader        // X-Accel-Buffering: no
	unbufConfig        // response_buffering.enabled false, or excluded
	unbufBudget        // no memory and no disk within the caps
	countMemory        // buffered whole in memory
	countDisk          // buffered, partly in its temporary file
	countKinds
	unbufReasons = countMemory
)

var unbufNames = [unbufReasons]string{"stream", "header", "config", "budget"}

// Policy is a Config as the buffers apply it to a response.
type Policy struct {
	On      bool
	Mem     int64 // one response's memory, bytes
	MaxMem  int64 // every response's memory, bytes
	File    int64 // one response's file, bytes; 0: no files
	MaxDisk int64 // every file, bytes
	Dir     string
	ConnMem int64 // one client connection's part of MaxMem, bytes; -1: none
	SoftMem int64 // the soft memory limit: 0 automatic, -1 none
	paths   []string
	ctypes  []string // lower-cased
}

// NewPolicy returns the policy of c (with its defaults set).
func NewPolicy(c *Config) Policy {
	p := Policy{On: c.Enabled == nil || *c.Enabled, Mem: c.MemoryBytes, MaxMem: c.MaxMemoryBytes,
		File: max(c.MaxFileBytes, 0), MaxDisk: c.MaxDiskBytes, Dir: c.TempDir, paths: c.ExcludePaths,
		ConnMem: c.ConnectionMemoryBytes, SoftMem: c.SoftMemoryLimitBytes}
	for _, t := range c.ExcludeContentTypes {
		p.ctypes = append(p.ctypes, strings.ToLower(strings.TrimSpace(t)))
	}
	return p
}

// excluded reports whether the configuration keeps res, the answer to
// the client's request in, from being buffered.
func (p *Policy) excluded(in *http.Request, res *http.Response) bool {
	if !p.On {
		return true
	}
	if len(p.paths) > 0 && in != nil {
		path := in.URL.Path
		for _, x := range p.paths {
			if strings.HasPrefix(path, x) {
				return true
			}
		}
	}
	if len(p.ctypes) > 0 {
		ct := strings.ToLower(res.Header.Get("Content-Type"))
		for _, x := range p.ctypes {
			if strings.HasPrefix(ct, x) {
				return true
			}
		}
	}
	return false
}

// Buffers is the process's account of response buffers: the memory
// and disk in use (each generation's caps apply to its responses), the
// temporary files, and the counters. It is safe for concurrent use.
type Buffers struct {
	chunks *Pool  // 32 KiB chunks and their budget, shared with ReverseProxy's copy buffers
	prefix string // tempPrefix + pid + "-"
	log    *slog.Logger
	warn   rate.Sometimes // rate-limits temporary-file errors

	disk  atomic.Int64 // bytes of temporary files
	files atomic.Int64 // open temporary files
	caps  atomic.Pointer[Policy]

	buffered   *prometheus.CounterVec         // where = memory, disk
	unbuffered *prometheus.CounterVec         // reason
	counts     [countKinds]prometheus.Counter // unbuffered's by reason, then buffered's: countMemory, countDisk
}

// New returns the process's response buffers, which log to log; their
// chunks' budget is DefaultMaxMemoryBytes until Use sets a policy's.
func New(log *slog.Logger) *Buffers {
	b := &Buffers{chunks: NewPool(DefaultMaxMemoryBytes), prefix: tempPrefix + strconv.Itoa(os.Getpid()) + "-", log: log,
		warn: rate.Sometimes{Interval: 10 * time.Second}}
	b.buffered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "proxy_responses_buffered_total",
		Help: "Responses read whole from their backend into the response buffers: where = memory (never spilled), disk (partly in a temporary file).",
	}, []string{"where"})
	b.unbuffered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "proxy_responses_unbuffered_total",
		Help: "Responses with a body passed through without buffering, whole or in part, by reason: stream (upgrade, event stream, gRPC, long-lived), header (X-Accel-Buffering: no), config (response_buffering disabled or excluded), budget (no memory and no disk within the caps: back-pressure on the backend).",
	}, []string{"reason"})
	for i, n := range unbufNames {
		b.counts[i] = b.unbuffered.WithLabelValues(n)
	}
	b.counts[countMemory], b.counts[countDisk] = b.buffered.WithLabelValues("memory"), b.buffered.WithLabelValues("disk")
	return b
}

var (
	descBufMem = prometheus.NewDesc("proxy_response_buffer_bytes",
		"Memory held by response buffers, in bytes.", nil, nil)
	descBufCopy = prometheus.NewDesc("proxy_response_buffer_copy_bytes",
		"Memory of the proxy's 32 KiB copy buffers (response body to client), taken from the response buffers' budget, in bytes.", nil, nil)
	descBufIdle = prometheus.NewDesc("proxy_response_buffer_idle_bytes",
		"Memory of 32 KiB chunks kept for reuse, in bytes. Response buffers, copy buffers and idle chunks together stay within proxy_response_buffer_max_bytes.", nil, nil)
	descBufMemMax = prometheus.NewDesc("proxy_response_buffer_max_bytes",
		"The cap on the memory of response buffers (response_buffering.max_memory_bytes), in bytes.", nil, nil)
	descBufDisk = prometheus.NewDesc("proxy_response_buffer_disk_bytes",
		"Bytes in response buffers' temporary files.", nil, nil)
	descBufDiskMax = prometheus.NewDesc("proxy_response_buffer_disk_max_bytes",
		"The cap on the bytes of temporary files (response_buffering.max_disk_bytes).", nil, nil)
	descBufFiles = prometheus.NewDesc("proxy_response_buffer_files",
		"Open temporary files of response buffers.", nil, nil)
)

// bufCollector reports the response buffers' gauges.
type bufCollector struct{ b *Buffers }

// bufDescs are the gauges in the order of bufCollector.Collect's values.
var bufDescs = []*prometheus.Desc{descBufMem, descBufCopy, descBufIdle, descBufMemMax, descBufDisk, descBufDiskMax, descBufFiles}

func (c bufCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range bufDescs {
		ch <- d
	}
}

func (c bufCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.b.caps.Load()
	if p == nil {
		p = &Policy{} // no generation yet: no caps
	}
	st := c.b.State(p)
	for i, v := range []int64{st.MemoryBytes, st.CopyBytes, st.IdleBytes, st.MaxMemoryBytes, st.DiskBytes, st.MaxDiskBytes, st.Files} {
		ch <- prometheus.MustNewConstMetric(bufDescs[i], prometheus.GaugeValue, float64(v))
	}
}

// CopyBuffers returns the pool of ReverseProxy's copy buffers, which
// share the chunks' budget.
func (b *Buffers) CopyBuffers() *Pool { return b.chunks }

// CountConnections makes conns the count of open client connections,
// whose memory (Policy.ConnMem each) comes out of the budget first.
func (b *Buffers) CountConnections(conns func() int64) { b.chunks.conns = conns }

// Trim lets go of the chunks that stayed idle throughout the last
// interval of idleTrim.
func (b *Buffers) Trim(now time.Time) { b.chunks.trim(now) }

// Collectors returns the buffers' metrics.
func (b *Buffers) Collectors() []prometheus.Collector {
	return []prometheus.Collector{b.buffered, b.unbuffered, bufCollector{b}}
}

// State is the response buffers as GET /state shows them.
type State struct {
	Enabled     bool  `json:"enabled"`
	MemoryBytes int64 `json:"memory_bytes"`
	// CopyBytes is the memory of the 32 KiB copy buffers lent to
	// responses being written to their clients; IdleBytes that of the
	// chunks kept for reuse. MemoryBytes, CopyBytes and IdleBytes
	// together stay within MaxMemoryBytes.
	CopyBytes      int64 `json:"copy_bytes"`
	IdleBytes      int64 `json:"idle_bytes"`
	MaxMemoryBytes int64 `json:"max_memory_bytes"`
	DiskBytes      int64 `json:"disk_bytes"`
	MaxDiskBytes   int64 `json:"max_disk_bytes"`
	Files          int64 `json:"files"`
}

// Use makes p's caps the ones the gauges report (the running
// generation's), and its max_memory_bytes the budget of the chunks kept
// for reuse.
func (b *Buffers) Use(p *Policy) {
	b.caps.Store(p)
	b.chunks.setLimit(p.MaxMem, max(p.ConnMem, 0))
}

// State returns the buffers as GET /state shows them, under p.
func (b *Buffers) State(p *Policy) State {
	lent, idle := b.chunks.usage()
	cp := b.chunks.copyBytes()
	return State{Enabled: p.On, MemoryBytes: lent - cp, CopyBytes: cp, IdleBytes: idle, MaxMemoryBytes: p.MaxMem,
		DiskBytes: b.disk.Load(), MaxDiskBytes: p.MaxDisk, Files: b.files.Load()}
}

// lent returns the bytes of budgeted chunks out.
func (b *Buffers) lent() int64 {
	lent, _ := b.chunks.usage()
	return lent
}

// take adds n to v if the sum stays within limit, and reports whether it
// did.
func take(v *atomic.Int64, limit, n int64) bool {
	for {
		cur := v.Load()
		if cur+n > limit {
			return false
		}
		if v.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// SweepTempFiles removes from dir ("" the system's temporary directory)
// the temporary files of processes that no longer run (a crash between a
// file's creation and its unlinking leaves one), and returns how many it
// removed. It never removes a file of a running process, this one
// included.
func SweepTempFiles(dir string) (int, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	self := os.Getpid()
	n := 0
	var errs []error
	for _, e := range ents {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, tempPrefix)
		if !ok || e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == self || processAlive(pid) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// processAlive reports whether process pid exists (signal 0: EPERM
// means it exists under another user).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// HasBody reports whether res has a body to read.
func HasBody(res *http.Response) bool {
	if res.Body == nil || res.Body == http.NoBody || res.ContentLength == 0 {
		return false
	}
	if res.Request != nil && res.Request.Method == http.MethodHead {
		return false
	}
	return res.StatusCode != http.StatusNoContent && res.StatusCode != http.StatusNotModified
}

// NewSpool decides whether res, the answer to the client's request in,
// is buffered under p, and if so returns the spool of its body (read
// from res.Body), for x; nil leaves it unbuffered. hadBody is
// HasBody(res) before res.Body was wrapped; longLived is whether the
// request already streams. Start puts the spool in place.
func (b *Buffers) NewSpool(x Exchange, p *Policy, in *http.Request, res *http.Response, hadBody, longLived bool) *Spool {
	if !hadBody {
		return nil
	}
	accel := strings.ToLower(strings.TrimSpace(res.Header.Get(HeaderAccelBuffering)))
	ct := res.Header.Get("Content-Type")
	switch {
	case longLived || httpx.IsEventStream(ct) || strings.HasPrefix(ct, "application/grpc"):
		b.counts[unbufStream].Inc()
		return nil
	case accel == "no":
		b.counts[unbufHeader].Inc()
		return nil
	case accel != "yes" && p.excluded(in, res):
		b.counts[unbufConfig].Inc()
		return nil
	case b.chunks.reserved()+b.lent()+bufChunk > p.MaxMem && (p.File == 0 || b.disk.Load()+bufChunk > p.MaxDisk):
		b.counts[unbufBudget].Inc()
		return nil
	}
	s := &Spool{x: x, src: res.Body, length: res.ContentLength, resp: respAccount{b, p}}
	s.a, s.segs = &s.resp, s.segs0[:0]
	return s
}

// Start makes s res's body. A body of known length over HTTP/1.x is
// primed at once (its first read made on the calling goroutine), so that
// a client share's delay runs while the backend's response is read; one
// that may carry trailers at ReverseProxy's first read.
func (s *Spool) Start(res *http.Response) {
	res.Body = s
	if res.ContentLength > 0 && res.ProtoMajor == 1 && res.Trailer == nil {
		s.prime()
	}
}

// respAccount is a response spool's account: the chunks' budget and the
// disk of the response buffers b, within the caps of the generation's
// policy p, and their counters.
type respAccount struct {
	b *Buffers
	p *Policy
}

func (a *respAccount) memory(held, _ int64) []byte {
	if held+bufChunk <= a.p.Mem {
		if c := a.b.chunks.take(a.p.MaxMem); c != nil {
			return c[:]
		}
	}
	return nil
}

func (a *respAccount) spare() *chunk { return a.b.chunks.getFree() }

func (a *respAccount) release(buf []byte, budget bool) { a.b.chunks.give((*chunk)(buf), budget) }

func (a *respAccount) disk(end, n int64) bool {
	if n <= 0 {
		a.b.disk.Add(n)
		return true
	}
	return a.p.File > 0 && end+n <= a.p.File && take(&a.b.disk, a.p.MaxDisk, n)
}

// create creates a response's file, named sluice-resp-PID-*, and counts
// it.
func (a *respAccount) create() (*os.File, error) {
	f, err := createTemp(a.p.Dir, a.b.prefix)
	if err == nil {
		a.b.files.Add(1)
	}
	return f, err
}

func (a *respAccount) closeFile(f *os.File, size int64) {
	_ = f.Close()
	a.b.files.Add(-1)
	a.b.disk.Add(-size)
}

func (a *respAccount) fileFailed(err error) bool {
	a.b.warn.Do(func() {
		a.b.log.Warn("response buffering: a temporary file failed; this response goes on in memory, then passes through", "dir", a.p.Dir, "err", err)
	})
	return true
}

func (a *respAccount) count(what int) { a.b.counts[what].Inc() }
