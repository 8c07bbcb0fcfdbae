package proxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
}

func newBufferPolicy(c *ResponseBufferingConfig) bufferPolicy {
	p := bufferPolicy{on: c.Enabled == nil || *c.Enabled, mem: c.MemoryBytes, maxMem: c.MaxMemoryBytes,
		file: max(c.MaxFileBytes, 0), maxDisk: c.MaxDiskBytes, dir: c.TempDir, paths: c.ExcludePaths}
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
	chunks *bufferPool // 32 KiB chunks, shared with ReverseProxy's copy buffers
	prefix string      // tempPrefix + pid + "-"
	log    *slog.Logger
	warn   rate.Sometimes // rate-limits temporary-file errors

	mem   atomic.Int64 // bytes of budgeted chunks held
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
	for _, d := range []*prometheus.Desc{descBufMem, descBufMemMax, descBufDisk, descBufDiskMax, descBufFiles} {
		ch <- d
	}
}

func (c bufCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	var memMax, diskMax float64
	if p := b.caps.Load(); p != nil {
		memMax, diskMax = float64(p.maxMem), float64(p.maxDisk)
	}
	ch <- prometheus.MustNewConstMetric(descBufMem, prometheus.GaugeValue, float64(b.mem.Load()))
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
	Enabled        bool  `json:"enabled"`
	MemoryBytes    int64 `json:"memory_bytes"`
	MaxMemoryBytes int64 `json:"max_memory_bytes"`
	DiskBytes      int64 `json:"disk_bytes"`
	MaxDiskBytes   int64 `json:"max_disk_bytes"`
	Files          int64 `json:"files"`
}

// use makes p's caps the ones the gauges report (the running
// generation's).
func (b *respBuffers) use(p *bufferPolicy) { b.caps.Store(p) }

func (b *respBuffers) state(p *bufferPolicy) BufferState {
	return BufferState{Enabled: p.on, MemoryBytes: b.mem.Load(), MaxMemoryBytes: p.maxMem,
		DiskBytes: b.disk.Load(), MaxDiskBytes: p.maxDisk, Files: b.files.Load()}
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
	case b.mem.Load()+bufChunk > p.maxMem && (p.file == 0 || b.disk.Load()+bufChunk > p.maxDisk):
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

// spool is one buffered response body: what its filler has read from
// the backend and the client has not read yet, in order, in memory
// chunks and ranges of one temporary file. ReverseProxy reads it (Read,
// Close) on the handler's goroutine; its filler writes it, on a goroutine
// of its own after the first read (prime). Either of them frees its
// memory and file, whichever ends last.
type spool struct {
	b   *respBuffers
	p   *bufferPolicy
	rs  *reqState
	src io.ReadCloser // the backend's body (rs.upstream); read by the filler only

	// ready wakes the reader (data, or the end), space a waiting filler
	// (the client read, or closed). Both are made when the filler
	// goroutine starts: a response read whole by prime needs neither.
	ready chan struct{}
	space chan struct{}

	started bool  // primed; touched by the handler's goroutine only
	length  int64 // the body's Content-Length, or -1

	mu        sync.Mutex
	segs      []segment // unread data in order; segs[0] is read next
	got       int64     // bytes read from the backend
	memHeld   int64     // bytes of budgeted chunks in segs
	f         *os.File  // the temporary file, once needed
	fileEnd   int64     // bytes written to f (its size)
	noDisk    bool      // f failed: memory only from now on
	stage     *[bufChunk]byte
	running   bool // the filler goroutine runs
	srcClosed bool
	done      bool  // the backend's body ended: err is io.EOF or why not
	err       error // with done
	closed    bool  // ReverseProxy closed the body (or the request ended)
	freed     bool
	segs0     [2]segment // segs's first array: a small response allocates none
	spilled   bool       // some of the body went to f
	fellBack  bool       // waited for the client for lack of memory and disk
	streamed  bool       // became long-lived: pass-through from then on
}

// segment is a range of unread bytes: chunk[r:w] of a memory chunk, or
// the file's bytes [r, w) when chunk is nil.
type segment struct {
	chunk  *[bufChunk]byte
	budget bool // chunk is counted in the memory budget (else it is the pass-through's own)
	r, w   int64
}

// signal wakes the receiver of ch, if any (nil: none).
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// prime makes the filler's first read on the calling goroutine, and
// starts the filler if the body goes on.
func (s *spool) prime() {
	s.started = true
	more := s.step()
	if more && s.length > 0 && s.got >= s.length {
		// The whole body, without the io.EOF a reader may give only at
		// its next call, which then returns at once.
		more = s.step()
	}
	if !more {
		s.fillerDone()
		return
	}
	s.ready, s.space = make(chan struct{}, 1), make(chan struct{}, 1)
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
	go s.fill()
}

// fill is the filler's goroutine.
func (s *spool) fill() {
	for s.step() {
	}
	s.park()
	s.fillerDone()
}

// park keeps the filler, once the backend's body has ended, until the
// client has read what the response holds in memory, for at most
// parkAfter; then it moves what is left to the temporary file. Memory
// thus serves the clients that keep up: a thousand slow readers would
// otherwise hold all of max_memory_bytes for as long as they read, and
// every other response, however fast its client, would go through the
// disk (1 MiB answers to fast clients took 3 ms more at the median and
// 18 ms more at the 99th percentile under the slow-read attack).
func (s *spool) park() {
	t := time.NewTimer(parkAfter)
	defer t.Stop()
	for {
		s.mu.Lock()
		idle := s.closed || s.memHeld == 0 || s.streamed
		s.mu.Unlock()
		if idle {
			return
		}
		select {
		case <-s.space: // the client read, or went away
		case <-t.C:
			s.spill()
			return
		}
	}
}

// spill moves the unread bytes of the budgeted memory chunks to the
// temporary file, within the disk caps, in place in the queue; the
// chunks go back to the pool and the budget. Called by the filler after
// the body's end.
func (s *spool) spill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.segs {
		seg := &s.segs[i]
		if seg.chunk == nil || !seg.budget || seg.r >= seg.w {
			continue
		}
		n := seg.w - seg.r
		if s.closed || s.noDisk || s.p.file == 0 || s.fileEnd+n > s.p.file || !take(&s.b.disk, s.p.maxDisk, n) {
			return
		}
		if s.f == nil {
			f, err := s.b.tempFile(s.p.dir)
			if err != nil {
				s.noDisk = true
				s.b.disk.Add(-n)
				return
			}
			s.f = f
		}
		if _, err := s.f.WriteAt(seg.chunk[seg.r:seg.w], s.fileEnd); err != nil {
			s.noDisk = true
			s.b.disk.Add(-n)
			return
		}
		s.memHeld -= bufChunk
		s.b.mem.Add(-bufChunk)
		s.b.chunks.putChunk(seg.chunk)
		*seg = segment{r: s.fileEnd, w: s.fileEnd + n}
		s.fileEnd += n
		s.spilled = true
	}
}

// step reads one piece of the body from the backend into the spool,
// waiting first for room if there is none, and reports whether to go on.
func (s *spool) step() bool {
	s.mu.Lock()
	var dst []byte
	var toFile bool
	for {
		if s.closed {
			s.mu.Unlock()
			return false
		}
		var wait bool
		dst, toFile, wait = s.placeLocked()
		if !wait {
			break
		}
		s.fallBackLocked()
		s.mu.Unlock()
		t0 := time.Now()
		t := time.NewTimer(budgetRetry)
		select {
		case <-s.space:
		case <-t.C:
		}
		t.Stop()
		// The client's time, not the backend's: left out of the sample.
		s.rs.bpWait.Add(int64(time.Since(t0)))
		s.mu.Lock()
	}
	off := s.fileEnd
	s.mu.Unlock()

	n, err := s.src.Read(dst)
	var werr error
	if toFile && n > 0 {
		_, werr = s.f.WriteAt(dst[:n], off)
	}

	s.mu.Lock()
	switch {
	case toFile && werr != nil:
		// Keep the bytes read in memory and stop using the disk.
		s.noDisk = true
		s.b.disk.Add(-bufChunk)
		s.segs = append(s.segs, segment{chunk: s.stage, w: int64(n)})
		s.stage = nil
		s.b.warn.Do(func() {
			s.b.log.Warn("response buffering: temporary file write failed; this response goes on in memory", "err", werr)
		})
	case toFile:
		s.b.disk.Add(int64(n) - bufChunk) // the reservation was a whole chunk
		if n > 0 {
			if k := len(s.segs); k > 0 && s.segs[k-1].chunk == nil && s.segs[k-1].w == off {
				s.segs[k-1].w += int64(n)
			} else {
				s.segs = append(s.segs, segment{r: off, w: off + int64(n)})
			}
			s.fileEnd += int64(n)
		}
	default:
		s.segs[len(s.segs)-1].w += int64(n)
	}
	s.got += int64(n)
	if err != nil {
		s.done, s.err = true, err
	}
	closed := s.closed
	s.mu.Unlock()
	signal(s.ready)
	if err != nil && err != io.EOF {
		// The backend failed mid-body: release it now, not when the
		// client has read what came before the failure.
		s.rs.upstreamFailed()
	}
	return err == nil && !closed
}

// placeLocked returns where the filler's next read goes: the free end of
// the last memory chunk, a new budgeted chunk, the staging chunk of a
// write to the file (toFile), or, when the client has read everything
// and neither memory nor disk is left, a chunk of the pass-through's
// own. wait is true when there is no room until the client reads.
// Called with s.mu held.
func (s *spool) placeLocked() (dst []byte, toFile, wait bool) {
	if k := len(s.segs); k > 0 {
		if last := &s.segs[k-1]; last.chunk != nil && last.w < bufChunk {
			return last.chunk[last.w:], false, false
		}
	}
	if !s.streamed && s.rs.streamed.Load() {
		// Long-lived now (the stage's long_lived): stream it as it comes,
		// without reading ahead of the client.
		s.streamed = true
		s.b.unbuf[unbufStream].Inc()
	}
	if !s.streamed {
		if s.memHeld+bufChunk <= s.p.mem && take(&s.b.mem, s.p.maxMem, bufChunk) {
			s.memHeld += bufChunk
			c := s.b.chunks.getChunk()
			s.segs = append(s.segs, segment{chunk: c, budget: true})
			return c[:], false, false
		}
		if !s.noDisk && s.p.file > 0 && s.fileEnd+bufChunk <= s.p.file && take(&s.b.disk, s.p.maxDisk, bufChunk) {
			if s.f == nil {
				f, err := s.b.tempFile(s.p.dir)
				if err != nil {
					s.noDisk = true
					s.b.disk.Add(-bufChunk)
					s.b.warn.Do(func() {
						s.b.log.Warn("response buffering: cannot create a temporary file; responses go on in memory and then pass through", "dir", s.p.dir, "err", err)
					})
				} else {
					s.f = f
				}
			}
			if s.f != nil {
				if s.stage == nil {
					s.stage = s.b.chunks.getChunk()
				}
				s.spilled = true
				return s.stage[:], true, false
			}
		}
	}
	if len(s.segs) == 0 {
		s.fallBackLocked()
		c := s.b.chunks.getChunk()
		s.segs = append(s.segs, segment{chunk: c})
		return c[:], false, false
	}
	return nil, false, true
}

// fallBackLocked notes, once, that the response found no room within
// the caps: from now on it waits for its client. Called with s.mu held.
func (s *spool) fallBackLocked() {
	if !s.fellBack && !s.streamed {
		s.fellBack = true
		s.b.unbuf[unbufBudget].Inc()
	}
}

// fillerDone ends the filler: it closes the backend's body, gives back
// the chunk it staged file writes in, counts the response and, if the
// request is over, frees the spool.
func (s *spool) fillerDone() {
	s.mu.Lock()
	s.running = false
	closeSrc := !s.srcClosed
	s.srcClosed = true
	free := s.closed
	complete := s.done && s.err == io.EOF
	stage := s.stage // the file writes' chunk: not needed any more
	s.stage = nil
	s.mu.Unlock()
	if stage != nil {
		s.b.chunks.putChunk(stage)
	}
	if closeSrc {
		_ = s.src.Close()
	}
	if complete && !s.fellBack && !s.streamed {
		if s.spilled {
			s.b.onDisk.Inc()
		} else {
			s.b.inMem.Inc()
		}
	}
	if free {
		s.free()
	}
}

// Read returns the next bytes of the body, waiting for the filler when
// the client has caught up with it; after the last byte, the backend's
// io.EOF or error.
func (s *spool) Read(p []byte) (int, error) {
	if !s.started {
		s.prime()
	}
	if len(p) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, http.ErrBodyReadAfterClose
	}
	for {
		if len(s.segs) > 0 {
			seg := &s.segs[0]
			if seg.r < seg.w && seg.chunk != nil {
				n := copy(p, seg.chunk[seg.r:seg.w])
				seg.r += int64(n)
				s.popLocked()
				s.mu.Unlock()
				signal(s.space)
				return n, nil
			}
			if seg.r < seg.w {
				off, n := seg.r, min(int64(len(p)), seg.w-seg.r)
				f := s.f
				s.mu.Unlock()
				m, err := f.ReadAt(p[:n], off)
				s.mu.Lock()
				s.segs[0].r += int64(m)
				s.popLocked()
				s.mu.Unlock()
				signal(s.space)
				if m < int(n) {
					if err == nil || err == io.EOF {
						err = io.ErrUnexpectedEOF
					}
					return m, fmt.Errorf("sluice: response buffer file: %w", err)
				}
				return m, nil
			}
			if s.done && len(s.segs) > 0 {
				s.dropFirstLocked()
				continue
			}
		}
		if s.done && len(s.segs) == 0 {
			err := s.err
			s.mu.Unlock()
			return 0, err
		}
		s.mu.Unlock()
		<-s.ready
		s.mu.Lock()
	}
}

// popLocked drops the segments read to their end that the filler will
// not write to again: full chunks and file ranges (a later write to the
// file starts a range of its own). Called with s.mu held.
func (s *spool) popLocked() {
	for len(s.segs) > 0 {
		seg := &s.segs[0]
		if seg.r < seg.w || seg.chunk != nil && seg.w < bufChunk && !s.done {
			return
		}
		s.dropFirstLocked()
	}
}

// dropFirstLocked drops segs[0] and gives its chunk back. Called with
// s.mu held.
func (s *spool) dropFirstLocked() {
	seg := s.segs[0]
	if seg.chunk != nil {
		if seg.budget {
			s.memHeld -= bufChunk
			s.b.mem.Add(-bufChunk)
		}
		s.b.chunks.putChunk(seg.chunk)
	}
	s.segs[0] = segment{}
	s.segs = s.segs[1:]
}

// Close ends the client's side: when the filler is not running, the
// spool is freed now, else when the filler stops (at its next step, or
// when the request's context ends its read from the backend).
func (s *spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	running := s.running
	closeSrc := !running && !s.srcClosed
	if closeSrc {
		s.srcClosed = true
	}
	s.mu.Unlock()
	signal(s.space)
	if closeSrc {
		_ = s.src.Close()
	}
	if !running {
		s.free()
	}
	return nil
}

// free gives back the spool's memory and closes its file, once.
func (s *spool) free() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.freed {
		return
	}
	s.freed = true
	for len(s.segs) > 0 {
		s.dropFirstLocked()
	}
	s.segs = nil
	if s.stage != nil {
		s.b.chunks.putChunk(s.stage)
		s.stage = nil
	}
	if s.f != nil {
		_ = s.f.Close()
		s.f = nil
		s.b.files.Add(-1)
		s.b.disk.Add(-s.fileEnd)
	}
}
