// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"bytes"
	"compress/flate"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"
)

// History of the dashboard: a sampler goroutine (Dashboard.Run), started
// with the admin listener and stopped on shutdown, reads the server's
// state (its View) once a second and keeps the last HistoryLen samples
// in memory, encoded once as JSON, so that a page opened late shows the
// last ten minutes and every viewer of the event stream costs one write
// of bytes already made.
//
// The newest samples (up to historyBlock of them) are kept as they are;
// every historyBlock samples are sealed into one DEFLATE-compressed block,
// inflated again only for a viewer that asks for samples that old (a page
// opened late, or one reconnecting after more than a block's time). JSON
// samples of one proxy repeat their keys and most values, so a block is
// about a sixth of its samples' size; and a sample sealed loses the
// decisions the page would not show (see uiDecisionsShown), half of a
// busy stage's sample. The memory the history takes grows with the number
// of stages, classes and backends; this keeps ten minutes of a one-stage
// proxy under load (auto, ~4.4 KB a sample) to about 420 KB, the newest
// minute as sent and ~20 KB for each older one, instead of 2.6 MB (and a
// soak's resident set from growing by megabytes while the history fills).

// HistoryLen is the number of one-second samples kept (10 minutes).
const HistoryLen = 600

// HistoryInterval is the sampling interval.
const HistoryInterval = time.Second

// historyBlock is the number of samples sealed into one compressed block
// (one minute). HistoryLen is a multiple of it.
const historyBlock = 60

// uiDecisionsShown is the number of decisions per stage (and for the
// policer) the page keeps and shows, the newest (ui/index.html). A sample
// sealed into the history loses the decisions that have at least that
// many newer ones for the same stage after them: no viewer, opened late
// or resuming, would show them.
const uiDecisionsShown = 50

// history is the ring of encoded samples and the sampler's memory of the
// previous one (for rates).
type history struct {
	boot string

	mu sync.Mutex
	// blocks are the sealed samples, oldest first, each holding
	// historyBlock consecutive ones; tail the newer ones, uncompressed,
	// tail[i] being sample tailFrom+i. Only the sampler (push) changes
	// them, under mu.
	blocks   []histBlock
	tail     [][]byte
	tailFrom uint64
	// tailDecs[i] is the number of decisions tail[i] carries per stage
	// ("" the policer's): what sealing needs to drop those no viewer
	// would show.
	tailDecs [][]decCount
	next     uint64 // seq of the next sample (from 1)
	notify   chan struct{}
	closed   bool

	// the sampler's own state (only the sampler touches it)
	prev     prevSample
	lastDecs map[string]time.Time // newest decision seen per stage ("" key: policer)
}

func newHistory() *history {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &history{boot: hex.EncodeToString(b[:]), next: 1, tailFrom: 1,
		notify: make(chan struct{}), lastDecs: map[string]time.Time{}}
}

// histBlock is historyBlock consecutive samples from seq first on: each
// sample's length as a uvarint then its bytes, DEFLATE-compressed.
type histBlock struct {
	first uint64
	z     []byte
}

// sealBlock compresses samples into one block.
func sealBlock(first uint64, samples [][]byte) (histBlock, error) {
	var buf bytes.Buffer
	zw, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		return histBlock{}, err
	}
	var n [binary.MaxVarintLen64]byte
	for _, b := range samples {
		if _, err := zw.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))]); err != nil {
			return histBlock{}, err
		}
		if _, err := zw.Write(b); err != nil {
			return histBlock{}, err
		}
	}
	if err := zw.Close(); err != nil {
		return histBlock{}, err
	}
	return histBlock{first: first, z: bytes.Clone(buf.Bytes())}, nil
}

// samples inflates the block back into its samples.
func (b histBlock) samples() ([][]byte, error) {
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(b.z)))
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, historyBlock)
	for len(raw) > 0 {
		n, k := binary.Uvarint(raw)
		if k <= 0 || n > uint64(len(raw)-k) {
			return nil, errors.New("dashboard history: corrupt block")
		}
		out = append(out, raw[k:k+int(n):k+int(n)])
		raw = raw[k+int(n):]
	}
	return out, nil
}

// decCount is a number of decisions of one stage ("" the policer) in a
// sample.
type decCount struct {
	key string
	n   int
}

// pushSample stores an encoded sample, with the number of its decisions
// per stage, and wakes every viewer. A full tail is first sealed into a
// block (made outside the lock: only the sampler changes the tail), and
// blocks wholly older than HistoryLen samples are dropped.
func (h *history) pushSample(b []byte, decs []decCount) {
	var blk histBlock
	var err error
	full := len(h.tail) >= historyBlock
	if full {
		blk, err = sealBlock(h.tailFrom, h.sealable())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if full {
		// (sealBlock cannot fail writing to memory; if it did, the
		// samples kept so far would leave the history rather than
		// pile up.)
		if err == nil {
			h.blocks = append(h.blocks, blk)
		} else {
			h.blocks = nil // no gap: the history restarts after them
		}
		h.tail, h.tailFrom, h.tailDecs = nil, h.tailFrom+uint64(len(h.tail)), nil
	}
	h.tail = append(h.tail, b)
	h.tailDecs = append(h.tailDecs, decs)
	h.next++
	for len(h.blocks) > 0 && h.blocks[0].first+historyBlock <= h.firstKept(h.next) {
		h.blocks[0] = histBlock{}
		h.blocks = h.blocks[1:]
	}
	close(h.notify)
	h.notify = make(chan struct{})
}

// sealable returns the tail's samples as they go into a block: each
// without the decisions of the stages that have at least
// uiDecisionsShown newer ones after it in the tail.
func (h *history) sealable() [][]byte {
	out := make([][]byte, len(h.tail))
	newer := map[string]int{}
	for i := len(h.tail) - 1; i >= 0; i-- {
		out[i] = h.tail[i]
		var drop []string
		for _, d := range h.tailDecs[i] {
			if newer[d.key] >= uiDecisionsShown {
				drop = append(drop, d.key)
			}
		}
		if len(drop) > 0 {
			if b, err := withoutDecisions(h.tail[i], drop); err == nil {
				out[i] = b
			}
		}
		for _, d := range h.tailDecs[i] {
			newer[d.key] += d.n
		}
	}
	return out
}

// withoutDecisions re-encodes the sample b without the decisions of the
// stages in keys ("" the policer).
func withoutDecisions(b []byte, keys []string) ([]byte, error) {
	var smp Sample
	if err := json.Unmarshal(b, &smp); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k == "" && smp.Policer != nil {
			smp.Policer.Decisions = nil
		}
		for i := range smp.Stages {
			if k != "" && smp.Stages[i].Name == k {
				smp.Stages[i].Decisions = nil
			}
		}
	}
	return json.Marshal(&smp)
}

// size returns the bytes the history holds, for the metric.
func (h *history) size() float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, b := range h.blocks {
		n += len(b.z)
	}
	for _, b := range h.tail {
		n += len(b)
	}
	return float64(n)
}

// firstKept is the oldest sample kept when next is the next sample's seq.
func (h *history) firstKept(next uint64) uint64 {
	if next > HistoryLen {
		return next - HistoryLen
	}
	return 1
}

// close wakes every viewer for the last time; they see closed and end.
func (h *history) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.notify)
	}
}

// since returns the samples after seq (all those kept when seq is older
// than the ring), the seq of the first of them, the channel closed at the
// next sample, and whether the history is closed.
func (h *history) since(seq uint64) (out [][]byte, from uint64, wake <-chan struct{}, closed bool) {
	h.mu.Lock()
	from = max(seq+1, h.firstKept(h.next))
	var blocks []histBlock
	if from < h.tailFrom {
		for _, b := range h.blocks {
			if b.first+historyBlock > from {
				blocks = append(blocks, b)
			}
		}
	}
	tail := h.tail
	if from > h.tailFrom {
		tail = tail[min(from-h.tailFrom, uint64(len(tail))):]
	}
	tailFrom := max(from, h.tailFrom)
	wake, closed = h.notify, h.closed
	h.mu.Unlock()
	// Sealed blocks are immutable: inflated outside the lock.
	for _, b := range blocks {
		smp, err := b.samples()
		if err != nil {
			// Not reachable with blocks made by sealBlock; the viewer
			// gets what follows instead of a gap in the middle.
			out, from = out[:0], b.first+historyBlock
			continue
		}
		if b.first < from {
			smp = smp[min(from-b.first, uint64(len(smp))):]
		}
		out = append(out, smp...)
	}
	if len(out) == 0 {
		from = tailFrom
	}
	return append(out, tail...), from, wake, closed
}
