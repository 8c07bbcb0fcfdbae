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

// account lends a spool its memory and its temporary file within its
// caps, and counts its outcome: the response buffers' (respAccount) or a
// request body's own (bodyAccount). The spool calls it with its lock held.
type account interface {
	// memory lends the next piece of memory to a spool holding held bytes
	// of a body of length bytes (-1: unknown); nil when the caps leave none.
	memory(held, length int64) []byte
	// spare lends a 32 KiB chunk outside the caps (the staging chunk of
	// file writes, the pass-through's); release takes back memory (budget)
	// or a spare chunk.
	spare() *chunk
	release(buf []byte, budget bool)
	// disk reserves n bytes more for a file of end bytes, within the caps,
	// and reports whether it did; n < 0 gives back -n.
	disk(end, n int64) bool
	// create creates the unlinked temporary file; closeFile closes it and
	// gives back its size bytes.
	create() (*os.File, error)
	closeFile(f *os.File, size int64)
	// fileFailed reports whether the spool goes on without its file after
	// err (in memory, then passed through) rather than end with err.
	fileFailed(err error) bool
	// count counts an outcome: unbufStream, unbufBudget, countMemory or
	// countDisk.
	count(what int)
}

// Spool is one body, held in order as memory segments and ranges of one
// unlinked temporary file, from the time its filler reads it from its
// source to the time its reader reads it, once. A response body
// (Buffers.NewSpool) is read by ReverseProxy (Read, Close) on the
// handler's goroutine while its filler writes it, on a goroutine of its
// own after the first read (prime), within the response buffers' budget
// and caps. A request body (NewBody) is filled whole by Fill on the
// calling goroutine, then read. Either side frees the memory and the
// file, whichever ends last.
type Spool struct {
	a   account
	x   Exchange      // the request a response serves; nil for a request body
	src io.ReadCloser // the body's source; read by the filler only

	// The account a points to, allocated with the spool.
	resp respAccount
	body bodyAccount

	// ready wakes the reader (data, or the end), space a waiting filler
	// (the client read, or closed). Both are made when the filler
	// goroutine starts: a body read whole by prime or Fill needs neither.
	ready chan struct{}
	space chan struct{}

	started bool  // primed or filled; touched by the reader's goroutine only
	length  int64 // the body's Content-Length, or -1

	mu        sync.Mutex
	segs      []segment // unread data in order; segs[0] is read next
	got       int64     // bytes read from the source
	memHeld   int64     // bytes of memory lent by a.memory in segs
	f         *os.File  // the temporary file, once needed
	fileEnd   int64     // bytes written to f (its size)
	noDisk    bool      // f failed: memory only from now on
	stage     *chunk    // the staging chunk of writes to f
	running   bool      // the filler goroutine runs
	srcClosed bool
	done      bool  // the source ended: err is io.EOF or why not
	err       error // with done
	closed    bool  // the reader closed the body (or the request ended)
	freed     bool
	segs0     [2]segment // segs's first array: a small body allocates none
	spilled   bool       // some of the body went to f
	fellBack  bool       // waited for the client for lack of memory and disk
	streamed  bool       // became long-lived: pass-through from then on
}

// segment is a range of unread bytes: buf[r:w] of a piece of memory
// (buf[w:] is free), or the file's bytes [r, w) when buf is nil.
type segment struct {
	buf    []byte
	budget bool // buf was lent by account.memory (else by spare)
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

// Fill reads src to its end into s on the calling goroutine, before
// anything reads s, which then reads from the first byte. It returns
// nil at src's io.EOF, else src's error or the file's (close s then).
func (s *Spool) Fill(src io.Reader) error {
	s.src, s.started = io.NopCloser(src), true
	for s.step() {
	}
	s.fillerDone()
	if s.err == io.EOF {
		return nil
	}
	return s.err
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

// spill moves the unread bytes of the budgeted memory to the temporary
// file, within the disk caps, in place in the queue; the memory goes
// back to the account. Called by the filler after the body's end.
func (s *Spool) spill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.segs {
		seg := &s.segs[i]
		if seg.buf == nil || !seg.budget || seg.r >= seg.w {
			continue
		}
		n := seg.w - seg.r
		if s.closed || s.noDisk || !s.a.disk(s.fileEnd, n) {
			return
		}
		err := s.openLocked()
		if err == nil {
			_, err = s.f.WriteAt(seg.buf[seg.r:seg.w], s.fileEnd)
		}
		if err != nil {
			s.a.disk(0, -n)
			s.noDisk = s.a.fileFailed(err)
			return
		}
		s.memHeld -= int64(len(seg.buf))
		s.a.release(seg.buf, true)
		*seg = segment{r: s.fileEnd, w: s.fileEnd + n}
		s.fileEnd += n
		s.spilled = true
	}
}

// openLocked creates the temporary file if there is none yet. Called
// with s.mu held.
func (s *Spool) openLocked() error {
	if s.f != nil {
		return nil
	}
	f, err := s.a.create()
	s.f = f
	return err
}

// step reads one piece of the body from the source into the spool,
// waiting first for room if there is none, and reports whether to go on.
func (s *Spool) step() bool {
	s.mu.Lock()
	dst, toFile := s.roomLocked()
	off := s.fileEnd
	s.mu.Unlock()
	if dst == nil {
		signal(s.ready)
		return false
	}

	n, err := s.src.Read(dst)
	var werr error
	if toFile && n > 0 {
		_, werr = s.f.WriteAt(dst[:n], off)
	}

	s.mu.Lock()
	switch {
	case toFile && werr != nil:
		s.a.disk(0, -bufChunk)
		if s.noDisk = s.a.fileFailed(werr); !s.noDisk {
			err = werr
			break
		}
		// Keep the bytes read in memory and stop using the disk.
		s.pushLocked(segment{buf: s.stage[:], w: int64(n)})
		s.stage = nil
	case toFile:
		s.a.disk(0, int64(n)-bufChunk) // the reservation was a whole chunk
		if n > 0 {
			if k := len(s.segs); k > 0 && s.segs[k-1].buf == nil && s.segs[k-1].w == off {
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
	if err != nil && err != io.EOF && s.x != nil {
		// The backend failed mid-body: release it now, not when the
		// client has read what came before the failure.
		s.x.UpstreamFailed()
	}
	return err == nil && !closed
}

// roomLocked returns where the filler's next read goes: the free end of
// the last memory segment, new memory from the account, the staging
// chunk of a write to the file (toFile), or, when the reader has read
// everything and neither memory nor disk is left, a chunk of the
// pass-through's own. Else it waits for the reader, retrying the caps
// every budgetRetry, with s.mu released. dst is nil when the spool is
// closed, or ended by its file (its account does not go on without it).
// Called with s.mu held.
func (s *Spool) roomLocked() (dst []byte, toFile bool) {
	for !s.closed {
		if k := len(s.segs); k > 0 {
			if last := &s.segs[k-1]; last.buf != nil && last.w < int64(len(last.buf)) {
				return last.buf[last.w:], false
			}
		}
		if !s.streamed && s.x != nil && s.x.LongLived() {
			// Long-lived now (the stage's long_lived): stream it as it
			// comes, without reading ahead of the client.
			s.streamed = true
			s.a.count(unbufStream)
		}
		if !s.streamed {
			if m := s.a.memory(s.memHeld, s.length); m != nil {
				s.memHeld += int64(len(m))
				s.pushLocked(segment{buf: m, budget: true})
				return m, false
			}
			if !s.noDisk && s.a.disk(s.fileEnd, bufChunk) {
				err := s.openLocked()
				if err == nil {
					if s.stage == nil {
						s.stage = s.a.spare()
					}
					s.spilled = true
					return s.stage[:], true
				}
				s.a.disk(0, -bufChunk)
				if s.noDisk = s.a.fileFailed(err); !s.noDisk {
					s.done, s.err = true, err
					return nil, false
				}
			}
		}
		if !s.fellBack && !s.streamed { // no room within the caps: counted once
			s.fellBack = true
			s.a.count(unbufBudget)
		}
		if len(s.segs) == 0 {
			c := s.a.spare()
			s.pushLocked(segment{buf: c[:]})
			return c[:], false
		}
		s.mu.Unlock()
		t0 := time.Now()
		t := time.NewTimer(budgetRetry)
		select {
		case <-s.space:
		case <-t.C:
		}
		t.Stop()
		if s.x != nil { // the client's time, not the backend's: left out of the sample
			s.x.ClientWait(time.Since(t0))
		}
		s.mu.Lock()
	}
	return nil, false
}

// pushLocked appends seg to the queue. When the queue moves to a larger
// array, the old one is cleared: the first is segs0, which lives as long
// as the spool, and the memory left in it would keep 64 KiB of chunks
// alive per response, given back to the pool or not (a slow reader's
// response lives for as long as it reads: 1,000 of them kept 37 MB of
// chunks out of reach of the collector under the slow-read attack of
// docs/reliability.md). Called with s.mu held.
func (s *Spool) pushLocked(seg segment) {
	old := s.segs
	s.segs = append(s.segs, seg)
	if len(old) == cap(old) { // append moved the queue
		clear(old)
	}
}

// fillerDone ends the filler: it closes the source, gives back the
// chunk it staged file writes in, counts the body and, if the reader is
// done, frees the spool.
func (s *Spool) fillerDone() {
	s.mu.Lock()
	s.running = false
	closeSrc := !s.srcClosed
	s.srcClosed = true
	free := s.closed
	if s.stage != nil { // the file writes' chunk: not needed any more
		s.a.release(s.stage[:], false)
		s.stage = nil
	}
	if s.done && s.err == io.EOF && !s.fellBack && !s.streamed {
		what := countMemory
		if s.spilled {
			what = countDisk
		}
		s.a.count(what)
	}
	s.mu.Unlock()
	if closeSrc {
		_ = s.src.Close()
	}
	if free {
		s.free()
	}
}

// Read returns the next bytes of the body, waiting for the filler when
// the reader has caught up with it; after the last byte, the source's
// io.EOF or error.
func (s *Spool) Read(p []byte) (int, error) {
	if !s.started {
		s.prime()
	}
	if len(p) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			return 0, http.ErrBodyReadAfterClose
		}
		if len(s.segs) > 0 {
			seg := &s.segs[0]
			if seg.r < seg.w && seg.buf != nil {
				n := copy(p, seg.buf[seg.r:seg.w])
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
				if !s.closed { // else the queue may be gone (Close frees it)
					s.segs[0].r += int64(m)
					s.popLocked()
				}
				s.mu.Unlock()
				signal(s.space)
				if m < int(n) {
					if err == nil || err == io.EOF {
						err = io.ErrUnexpectedEOF
					}
					return m, fmt.Errorf("sluice: buffer file: %w", err)
				}
				return m, nil
			}
			if s.done {
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
// not write to again: full memory and file ranges (a later write to the
// file starts a range of its own). Called with s.mu held.
func (s *Spool) popLocked() {
	for len(s.segs) > 0 {
		seg := &s.segs[0]
		if seg.r < seg.w || seg.buf != nil && seg.w < int64(len(seg.buf)) && !s.done {
			return
		}
		s.dropFirstLocked()
	}
}

// dropFirstLocked drops segs[0] and gives its memory back. Called with
// s.mu held.
func (s *Spool) dropFirstLocked() {
	seg := s.segs[0]
	if seg.buf != nil {
		if seg.budget {
			s.memHeld -= int64(len(seg.buf))
		}
		s.a.release(seg.buf, seg.budget)
	}
	s.segs[0] = segment{}
	s.segs = s.segs[1:]
}

// Close ends the reader's side: when the filler is not running, the
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
	closeSrc := !running && !s.srcClosed && s.src != nil
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
	if s.f != nil {
		s.a.closeFile(s.f, s.fileEnd)
		s.f = nil
	}
}
