// SPDX-License-Identifier: Apache-2.0

package buffer

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// Exchange is the request a response buffer serves: what the buffer
// tells it, and asks it, from the filler's goroutine.
type Exchange interface {
	// ClientWait adds d to the time the filler waited for the client to
	// read: the client's time, not the backend's.
	ClientWait(d time.Duration)
	// UpstreamFailed ends the exchange with the backend early: its body
	// failed to read (the client still gets what came before).
	UpstreamFailed()
	// LongLived reports whether the response became long-lived (the
	// stage's long_lived): it is then streamed as it comes.
	LongLived() bool
}

// Spool is one buffered response body: what its filler has read from
// the backend and the client has not read yet, in order, in memory
// chunks and ranges of one temporary file. ReverseProxy reads it (Read,
// Close) on the handler's goroutine; its filler writes it, on a goroutine
// of its own after the first read (prime). Either of them frees its
// memory and file, whichever ends last.
type Spool struct {
	b   *Buffers
	p   *Policy
	x   Exchange
	src io.ReadCloser // the backend's body; read by the filler only

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
func (s *Spool) prime() {
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
func (s *Spool) fill() {
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
func (s *Spool) park() {
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
func (s *Spool) spill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.segs {
		seg := &s.segs[i]
		if seg.chunk == nil || !seg.budget || seg.r >= seg.w {
			continue
		}
		n := seg.w - seg.r
		if s.closed || s.noDisk || s.p.File == 0 || s.fileEnd+n > s.p.File || !take(&s.b.disk, s.p.MaxDisk, n) {
			return
		}
		if s.f == nil {
			f, err := s.b.tempFile(s.p.Dir)
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
		s.b.chunks.give(seg.chunk)
		*seg = segment{r: s.fileEnd, w: s.fileEnd + n}
		s.fileEnd += n
		s.spilled = true
	}
}

// step reads one piece of the body from the backend into the spool,
// waiting first for room if there is none, and reports whether to go on.
func (s *Spool) step() bool {
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
		s.x.ClientWait(time.Since(t0))
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
		s.pushLocked(segment{chunk: s.stage, w: int64(n)})
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
				s.pushLocked(segment{r: off, w: off + int64(n)})
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
		s.x.UpstreamFailed()
	}
	return err == nil && !closed
}

// placeLocked returns where the filler's next read goes: the free end of
// the last memory chunk, a new budgeted chunk, the staging chunk of a
// write to the file (toFile), or, when the client has read everything
// and neither memory nor disk is left, a chunk of the pass-through's
// own. wait is true when there is no room until the client reads.
// Called with s.mu held.
func (s *Spool) placeLocked() (dst []byte, toFile, wait bool) {
	if k := len(s.segs); k > 0 {
		if last := &s.segs[k-1]; last.chunk != nil && last.w < bufChunk {
			return last.chunk[last.w:], false, false
		}
	}
	if !s.streamed && s.x.LongLived() {
		// Long-lived now (the stage's long_lived): stream it as it comes,
		// without reading ahead of the client.
		s.streamed = true
		s.b.unbuf[unbufStream].Inc()
	}
	if !s.streamed {
		if s.memHeld+bufChunk <= s.p.Mem {
			if c := s.b.chunks.take(s.p.MaxMem); c != nil {
				s.memHeld += bufChunk
				s.pushLocked(segment{chunk: c, budget: true})
				return c[:], false, false
			}
		}
		if !s.noDisk && s.p.File > 0 && s.fileEnd+bufChunk <= s.p.File && take(&s.b.disk, s.p.MaxDisk, bufChunk) {
			if s.f == nil {
				f, err := s.b.tempFile(s.p.Dir)
				if err != nil {
					s.noDisk = true
					s.b.disk.Add(-bufChunk)
					s.b.warn.Do(func() {
						s.b.log.Warn("response buffering: cannot create a temporary file; responses go on in memory and then pass through", "dir", s.p.Dir, "err", err)
					})
				} else {
					s.f = f
				}
			}
			if s.f != nil {
				if s.stage == nil {
					s.stage = s.b.chunks.getFree()
				}
				s.spilled = true
				return s.stage[:], true, false
			}
		}
	}
	if len(s.segs) == 0 {
		s.fallBackLocked()
		c := s.b.chunks.getFree()
		s.pushLocked(segment{chunk: c})
		return c[:], false, false
	}
	return nil, false, true
}

// pushLocked appends seg to the queue. When the queue moves to a larger
// array, the old one is cleared: the first is segs0, which lives as long
// as the spool, and the chunk pointers left in it would keep 64 KiB of
// chunks alive per response, given back to the pool or not (a slow
// reader's response lives for as long as it reads: 1,000 of them kept
// 37 MB of chunks out of reach of the collector under the slow-read
// attack of docs/reliability.md). Called with s.mu held.
func (s *Spool) pushLocked(seg segment) {
	old := s.segs
	s.segs = append(s.segs, seg)
	if len(old) == cap(old) { // append moved the queue
		clear(old)
	}
}

// fallBackLocked notes, once, that the response found no room within
// the caps: from now on it waits for its client. Called with s.mu held.
func (s *Spool) fallBackLocked() {
	if !s.fellBack && !s.streamed {
		s.fellBack = true
		s.b.unbuf[unbufBudget].Inc()
	}
}

// fillerDone ends the filler: it closes the backend's body, gives back
// the chunk it staged file writes in, counts the response and, if the
// request is over, frees the spool.
func (s *Spool) fillerDone() {
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
		s.b.chunks.putFree(stage)
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
func (s *Spool) Read(p []byte) (int, error) {
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
func (s *Spool) popLocked() {
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
func (s *Spool) dropFirstLocked() {
	seg := s.segs[0]
	switch {
	case seg.chunk != nil && seg.budget:
		s.memHeld -= bufChunk
		s.b.chunks.give(seg.chunk)
	case seg.chunk != nil:
		s.b.chunks.putFree(seg.chunk)
	}
	s.segs[0] = segment{}
	s.segs = s.segs[1:]
}

// Close ends the client's side: when the filler is not running, the
// spool is freed now, else when the filler stops (at its next step, or
// when the request's context ends its read from the backend).
func (s *Spool) Close() error {
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
func (s *Spool) free() {
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
		s.b.chunks.putFree(s.stage)
		s.stage = nil
	}
	if s.f != nil {
		_ = s.f.Close()
		s.f = nil
		s.b.files.Add(-1)
		s.b.disk.Add(-s.fileEnd)
	}
}
