// SPDX-License-Identifier: Apache-2.0

package proxy

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

// Response buffering (config section response_buffering, nginx's
// proxy_buffering).
//
// Without it, ReverseProxy reads a backend's response 32 KiB at a time
// and writes each piece to the client before it reads the next: a client
// that reads slowly keeps the backend's response unread, and with it the
// backend's worker, the upstream connection, the pool slot, the stage's
// concurrency and the response-time sample (which ends at the last byte
// read from the backend, upstreamDone). A thousand slow readers of large
// responses hold every slot.
//
// With it, each response body is read from the backend by a filler of its
// own, as fast as the backend sends it, into a spool: 32 KiB chunks of
// memory (at most memory_bytes of one response, max_memory_bytes of all
// of them), then an unlinked temporary file (at most max_file_bytes of
// one response, max_disk_bytes of all). ReverseProxy reads the spool and
// writes to the client at the client's pace, so the backend is released
// when it has sent its last byte. A fast client reads the spool as fast
// as it fills: memory is given back as the client reads, and the disk is
// only used for what a slow client leaves behind. What a client has not
// read within parkAfter of the backend's last byte moves from memory to
// the file (park), so that slow readers do not keep the memory from the
// clients that keep up.
//
// The filler is a goroutine, except that its first read is made by the
// handler's goroutine (prime): a response whose body arrived with its
// headers (every small one) is read whole there, with no goroutine and no
// wait, at the cost of one copy.
//
// A response of known length over HTTP/1.x is primed in modifyResponse,
// so that a client share's delay (shares.go) runs while the backend's
// response is read; one that may carry trailers (chunked, HTTP/2) is
// primed at ReverseProxy's first read of the body, after ReverseProxy has
// looked at its trailer keys: the filler fills the response's Trailer map
// when it reaches the end, and ReverseProxy reads the map again only
// after the spool's end.
//
// When neither memory nor disk can be had within the caps, the filler
// waits for the client to read what is already spooled (retrying the
// caps every budgetRetry), and once the client has read it all, it reads
// one piece at a time from the backend into a chunk of its own: the
// pass-through of an unbuffered response, with back-pressure on the
// backend. Nothing is refused, lost or answered 5xx because of
// buffering. A response that falls back like this, or that finds no room
// at all when it starts (it is then passed through without a spool), is
// counted in proxy_responses_unbuffered_total{reason="budget"}; the time
// its filler waited for the client is not the backend's (it is left out
// of the response-time sample).
//
// A backend error in the middle of a body is handed to ReverseProxy
// after the bytes that came before it, as it would be without buffering:
// the client gets those bytes and then a connection closed before the
// end of the body (never a complete-looking answer). The backend's slot
// and the stage's sample are released when the error happens. A client
// that goes away (send_timeout, a reset) ends its request: the spool's
// memory and file are freed at once, or, while the filler is still
// reading, as soon as the request's context ends and the filler's read
// with it.

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
// reason).
const (
	unbufStream = iota // an upgrade, event stream, gRPC, or long-lived response
	unbufHeader        // X-Accel-Buffering: no
	unbufConfig        // response_buffering.enabled false, or excluded
	unbufBudget        // no memory and no disk within the caps
	unbufReasons
)

var unbufNames = [unbufReasons]string{"stream", "header", "config", "budget"}

// bufferPolicy is one generation's response_buffering.
type bufferPolicy struct {
	on      bool
	mem     int64 // one response's memory, bytes
	maxMem  int64 // every response's memory, bytes
	file    int64 // one response's file, bytes; 0: no files
	maxDisk int64 // every file, bytes
	dir     string
	paths   []string
	ctypes  []string // lower-cased
	connMem int64    // one client connection's part of maxMem, bytes; -1: none
	softMem int64    // the soft memory limit: 0 automatic, -1 none
}

func newBufferPolicy(c *ResponseBufferingConfig) bufferPolicy {
	p := bufferPolicy{on: c.Enabled == nil || *c.Enabled, mem: c.MemoryBytes, maxMem: c.MaxMemoryBytes,
		file: max(c.MaxFileBytes, 0), maxDisk: c.MaxDiskBytes, dir: c.TempDir, paths: c.ExcludePaths,
		connMem: c.ConnectionMemoryBytes, softMem: c.SoftMemoryLimitBytes}
	for _, t := range c.ExcludeContentTypes {
		p.ctypes = append(p.ctypes, strings.ToLower(strings.TrimSpace(t)))
	}
	return p
}

// excluded reports whether the configuration keeps res, the answer to
// the client's request in, from being buffered.
func (p *bufferPolicy) excluded(in *http.Request, res *http.Response) bool {
	if !p.on {
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

// respBuffers is the process's account of response buffers: the memory
// and disk in use (each generation's caps apply to its responses), the
// temporary files, and the counters. It is safe for concurrent use.
type respBuffers struct {
	chunks *bufferPool // 32 KiB chunks and their budget, shared with ReverseProxy's copy buffers
	prefix string      // tempPrefix + pid + "-"
	log    *slog.Logger
	warn   rate.Sometimes // rate-limits temporary-file errors

	disk  atomic.Int64 // bytes of temporary files
	files atomic.Int64 // open temporary files
	caps  atomic.Pointer[bufferPolicy]

	buffered   *prometheus.CounterVec // where = memory, disk
	unbuffered *prometheus.CounterVec // reason
	inMem      prometheus.Counter
	onDisk     prometheus.Counter
	unbuf      [unbufReasons]prometheus.Counter
}

func newRespBuffers(chunks *bufferPool, log *slog.Logger) *respBuffers {
	b := &respBuffers{chunks: chunks, prefix: tempPrefix + strconv.Itoa(os.Getpid()) + "-", log: log,
		warn: rate.Sometimes{Interval: 10 * time.Second}}
	b.buffered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "proxy_responses_buffered_total",
		Help: "Responses read whole from their backend into the response buffers: where = memory (never spilled), disk (partly in a temporary file).",
	}, []string{"where"})
	b.unbuffered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "proxy_responses_unbuffered_total",
		Help: "Responses with a body passed through without buffering, whole or in part, by reason: stream (upgrade, event stream, gRPC, long-lived), header (X-Accel-Buffering: no), config (response_buffering disabled or excluded), budget (no memory and no disk within the caps: back-pressure on the backend).",
	}, []string{"reason"})
	b.inMem, b.onDisk = b.buffered.WithLabelValues("memory"), b.buffered.WithLabelValues("disk")
	for i, n := range unbufNames {
		b.unbuf[i] = b.unbuffered.WithLabelValues(n)
	}
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
type bufCollector struct{ b *respBuffers }

func (c bufCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBufMem, descBufCopy, descBufIdle, descBufMemMax, descBufDisk, descBufDiskMax, descBufFiles} {
		ch <- d
	}
}

func (c bufCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	var memMax, diskMax float64
	if p := b.caps.Load(); p != nil {
		memMax, diskMax = float64(p.maxMem), float64(p.maxDisk)
	}
	lent, idle := b.chunks.usage()
	cp := b.chunks.copyBytes()
	ch <- prometheus.MustNewConstMetric(descBufMem, prometheus.GaugeValue, float64(lent-cp))
	ch <- prometheus.MustNewConstMetric(descBufCopy, prometheus.GaugeValue, float64(cp))
	ch <- prometheus.MustNewConstMetric(descBufIdle, prometheus.GaugeValue, float64(idle))
	ch <- prometheus.MustNewConstMetric(descBufMemMax, prometheus.GaugeValue, memMax)
	ch <- prometheus.MustNewConstMetric(descBufDisk, prometheus.GaugeValue, float64(b.disk.Load()))
	ch <- prometheus.MustNewConstMetric(descBufDiskMax, prometheus.GaugeValue, diskMax)
	ch <- prometheus.MustNewConstMetric(descBufFiles, prometheus.GaugeValue, float64(b.files.Load()))
}

func (b *respBuffers) collectors() []prometheus.Collector {
	return []prometheus.Collector{b.buffered, b.unbuffered, bufCollector{b}}
}

// BufferState is the response buffers as GET /state shows them.
type BufferState struct {
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

// use makes p's caps the ones the gauges report (the running
// generation's), and its max_memory_bytes the budget of the chunks kept
// for reuse.
func (b *respBuffers) use(p *bufferPolicy) {
	b.caps.Store(p)
	b.chunks.setLimit(p.maxMem, max(p.connMem, 0))
}

func (b *respBuffers) state(p *bufferPolicy) BufferState {
	lent, idle := b.chunks.usage()
	cp := b.chunks.copyBytes()
	return BufferState{Enabled: p.on, MemoryBytes: lent - cp, CopyBytes: cp, IdleBytes: idle, MaxMemoryBytes: p.maxMem,
		DiskBytes: b.disk.Load(), MaxDiskBytes: p.maxDisk, Files: b.files.Load()}
}

// lent returns the bytes of budgeted chunks out.
func (b *respBuffers) lent() int64 {
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

// tempFile creates an unlinked temporary file in dir ("" the system's
// temporary directory), as nginx does with its proxy temporary files: it
// has no name while in use, and its space is freed when it is closed,
// even if the process dies.
func (b *respBuffers) tempFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, b.prefix+"*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	b.files.Add(1)
	return f, nil
}

// sweepTempFiles removes from dir ("" the system's temporary directory)
// the temporary files of processes that no longer run (a crash between a
// file's creation and its unlinking leaves one), and returns how many it
// removed. It never removes a file of a running process, this one
// included.
func sweepTempFiles(dir string) (int, error) {
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

// hasBody reports whether res has a body to read.
func hasBody(res *http.Response) bool {
	if res.Body == nil || res.Body == http.NoBody || res.ContentLength == 0 {
		return false
	}
	if res.Request != nil && res.Request.Method == http.MethodHead {
		return false
	}
	return res.StatusCode != http.StatusNoContent && res.StatusCode != http.StatusNotModified
}

// buffer decides whether res (its body already rs.upstream) is buffered
// and, if so, replaces its body by a spool. It runs in modifyResponse.
func (b *respBuffers) buffer(rs *reqState, res *http.Response, hadBody bool) {
	if !hadBody {
		return
	}
	p := &rs.gen.buf
	accel := strings.ToLower(strings.TrimSpace(res.Header.Get(HeaderAccelBuffering)))
	ct := res.Header.Get("Content-Type")
	switch {
	case rs.lc.Streamed() || httpx.IsEventStream(ct) || strings.HasPrefix(ct, "application/grpc"):
		b.unbuf[unbufStream].Inc()
		return
	case accel == "no":
		b.unbuf[unbufHeader].Inc()
		return
	case accel != "yes" && p.excluded(rs.in, res):
		b.unbuf[unbufConfig].Inc()
		return
	case b.chunks.reserved()+b.lent()+bufChunk > p.maxMem && (p.file == 0 || b.disk.Load()+bufChunk > p.maxDisk):
		b.unbuf[unbufBudget].Inc()
		return
	}
	s := &spool{b: b, p: p, rs: rs, src: res.Body, length: res.ContentLength}
	s.segs = s.segs0[:0]
	rs.spool, rs.buffered = s, true
	res.Body = s
	if res.ContentLength > 0 && res.ProtoMajor == 1 && res.Trailer == nil {
		s.prime()
	}
}
