package proxy

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/share"
	"github.com/sluicehq/sluice/stage"
)

// History of the dashboard: a sampler goroutine, started with the admin
// listener and stopped on shutdown, reads the proxy's state once a second
// and keeps the last HistoryLen samples in memory, encoded once as JSON,
// so that a page opened late shows the last ten minutes and every viewer
// of the event stream costs one write of bytes already made.
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

// sampleDecisions is the most decisions per stage (and for the policer) a
// sample carries: those taken since the previous sample, newest last.
const sampleDecisions = 10

// uiDecisionsShown is the number of decisions per stage (and for the
// policer) the page keeps and shows, the newest (ui/index.html). A sample
// sealed into the history loses the decisions that have at least that
// many newer ones for the same stage after them: no viewer, opened late
// or resuming, would show them.
const uiDecisionsShown = 50

// Sample is one second of the proxy as the dashboard shows it. Rates are
// per second; times are Unix milliseconds; latencies milliseconds.
type Sample struct {
	// Boot identifies the process (random per Server): a viewer that sees
	// it change starts its charts afresh. Seq numbers the samples from 1.
	Boot          string `json:"boot"`
	Seq           uint64 `json:"seq"`
	T             int64  `json:"t"`
	ConfigVersion uint64 `json:"config_version"`
	Shadow        bool   `json:"shadow"`
	InFlight      int64  `json:"requests_in_flight"`
	Streams       int64  `json:"streams_in_flight"`
	// Token reports whether admin.token is configured (the page then
	// asks for it before a change).
	Token     bool             `json:"token"`
	Stages    []SampleStage    `json:"stages"`
	Pool      SamplePool       `json:"pool"`
	Policer   *SamplePolicer   `json:"policer,omitempty"`
	Resources []SampleResource `json:"resources,omitempty"`
	Sensors   []SensorState    `json:"sensors,omitempty"`
	Shares    *share.Snapshot  `json:"shares,omitempty"`
}

// SampleStage is one stage: its controller's setting with the setting's
// kind and unit, every other numeric field of its /state entry (Numbers,
// by JSON path, e.g. "concurrency.in_flight"), its classes and the
// decisions taken since the previous sample.
type SampleStage struct {
	Name       string  `json:"name"`
	Controller string  `json:"controller"`
	Kind       string  `json:"kind"`
	Unit       string  `json:"unit"`
	Setting    float64 `json:"setting"`
	// Floor is the most restrictive setting the controller can reach
	// (lowest rate or limit, highest drop probability), when known.
	Floor   *float64 `json:"floor,omitempty"`
	Quality float64  `json:"quality"`
	GateOff bool     `json:"gate_off"`
	Shadow  bool     `json:"shadow"`
	// Target is the response-time target ("" without one); TargetMS the
	// same in milliseconds; Objective the statistic it holds (p90, mean)
	// when known.
	Target    string                `json:"target,omitempty"`
	TargetMS  float64               `json:"target_ms,omitempty"`
	Objective string                `json:"objective,omitempty"`
	Numbers   map[string]float64    `json:"numbers,omitempty"`
	Classes   []SampleClass         `json:"classes"`
	Decisions []stage.DecisionState `json:"decisions,omitempty"`
}

// SampleClass is one class of a stage: totals since start (up to the last
// control period), rates per second over the control periods that ended
// since the previous sample, and every numeric field of the last period
// (Last: p50_ms, p90_ms, p99_ms, mean_ms, queue, …).
type SampleClass struct {
	Name   string             `json:"name"`
	Totals ClassCounts        `json:"totals"`
	Rates  ClassRates         `json:"rates"`
	Last   map[string]float64 `json:"last,omitempty"`
}

// ClassCounts are a class's request totals.
type ClassCounts struct {
	Offered        uint64 `json:"offered"`
	Admitted       uint64 `json:"admitted"`
	Rejected       uint64 `json:"rejected"`
	ShadowRejected uint64 `json:"shadow_rejected"`
	Completed      uint64 `json:"completed"`
	Errors         uint64 `json:"errors"`
}

// ClassRates are a class's requests per second.
type ClassRates struct {
	Offered        float64 `json:"offered"`
	Admitted       float64 `json:"admitted"`
	Rejected       float64 `json:"rejected"`
	ShadowRejected float64 `json:"shadow_rejected"`
	Completed      float64 `json:"completed"`
	Errors         float64 `json:"errors"`
}

// SamplePool is the backend pool: occupancy, the wait queue, its
// rejections and mean wait per second, and every server.
type SamplePool struct {
	Capacity int `json:"capacity"`
	InFlight int `json:"in_flight"`
	// Queue is the wait queue's length, QueueMax its bound, QueueTimeout
	// its longest wait.
	Queue        int    `json:"queue"`
	QueueMax     int    `json:"queue_max"`
	QueueTimeout string `json:"queue_timeout"`
	// RejectedPS are the pool's 503s per second (queue full or timed out);
	// WaitMS the mean wait, in ms, of the requests that waited for a slot
	// and got one since the previous sample (0 when none waited); WaitedPS
	// how many did per second.
	RejectedPS float64         `json:"rejected_per_second"`
	WaitMS     float64         `json:"wait_ms"`
	WaitedPS   float64         `json:"waited_per_second"`
	Servers    []SampleBackend `json:"servers"`
}

// SampleBackend is one upstream server.
type SampleBackend struct {
	URL      string  `json:"url"`
	InFlight int     `json:"in_flight"`
	Limit    int     `json:"max_concurrency"`
	ServedPS float64 `json:"served_per_second"`
}

// SamplePolicer is the connection policer: its rate and burst,
// connections per second offered, admitted and reset, live connections,
// the numeric inputs of its last period and its new decisions.
type SamplePolicer struct {
	Controller string                `json:"controller"`
	Rate       float64               `json:"rate"`
	Burst      int                   `json:"burst"`
	OfferedPS  float64               `json:"offered_per_second"`
	AdmittedPS float64               `json:"admitted_per_second"`
	RejectedPS float64               `json:"rejected_per_second"`
	LiveConns  int                   `json:"live_connections"`
	Last       map[string]float64    `json:"last,omitempty"`
	GuardError string                `json:"guard_error,omitempty"`
	Decisions  []stage.DecisionState `json:"decisions,omitempty"`
}

// SampleResource is one resource rule.
type SampleResource struct {
	Stage       string   `json:"stage"`
	Resource    string   `json:"resource"`
	Sensor      string   `json:"sensor"`
	Rate        float64  `json:"rate"`
	HitsPS      float64  `json:"hits_per_second"`
	RejectedPS  float64  `json:"rejected_per_second"`
	Input       *float64 `json:"input,omitempty"`
	SensorError string   `json:"sensor_error,omitempty"`
}

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

type classKey struct{ stage, class string }

type prevSample struct {
	at      time.Time
	classes map[classKey]classPrev
	served  map[string]uint64
	poolRej uint64
	waited  uint64
	waitNS  uint64
	pol     [3]uint64 // offered, admitted, rejected
	rules   map[classKey]uint64
}

type classPrev struct {
	end    time.Time
	totals ClassCounts
	rates  ClassRates
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

// run samples s every HistoryInterval until ctx ends, then closes the
// history.
func (h *history) run(ctx context.Context, s *Server) {
	defer h.close()
	t := time.NewTicker(HistoryInterval)
	defer t.Stop()
	h.sampleNow(s, time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.sampleNow(s, now)
		}
	}
}

// sampleNow takes, encodes and stores one sample.
func (h *history) sampleNow(s *Server, now time.Time) {
	smp := h.take(s, now)
	b, err := json.Marshal(smp)
	if err != nil {
		s.log.Warn("dashboard: encoding a sample", "err", err)
		return
	}
	h.pushSample(b, decisionCounts(smp))
}

// decisionCounts returns the number of decisions smp carries per stage
// ("" the policer).
func decisionCounts(smp *Sample) []decCount {
	var decs []decCount
	for _, st := range smp.Stages {
		if n := len(st.Decisions); n > 0 {
			decs = append(decs, decCount{st.Name, n})
		}
	}
	if p := smp.Policer; p != nil && len(p.Decisions) > 0 {
		decs = append(decs, decCount{"", len(p.Decisions)})
	}
	return decs
}

// take reads the proxy's state at now into a Sample. Only the sampler
// calls it.
func (h *history) take(s *Server, now time.Time) *Sample {
	g := s.h.gen.Load()
	doc := s.State(3 * sampleDecisions)
	h.mu.Lock()
	seq := h.next
	h.mu.Unlock()
	prev := h.prev
	cur := prevSample{at: now, classes: map[classKey]classPrev{}, served: map[string]uint64{}, rules: map[classKey]uint64{}}
	dt := now.Sub(prev.at).Seconds()
	perSec := func(d uint64, old uint64) float64 {
		if prev.at.IsZero() || dt <= 0 || d < old {
			return 0
		}
		return float64(d-old) / dt
	}
	smp := &Sample{Boot: h.boot, Seq: seq, T: now.UnixMilli(), ConfigVersion: doc.ConfigVersion, Shadow: doc.Shadow,
		InFlight: doc.InFlight, Streams: doc.Streams, Token: s.auth != nil && s.auth.enabled(), Sensors: doc.Sensors,
		Shares: doc.Shares}

	for _, st := range doc.Stages {
		ss := SampleStage{Name: st.Name, Controller: st.Controller, Kind: st.Kind, Unit: st.Unit, Setting: st.Setting,
			Quality: st.Quality, GateOff: st.GateOff, Shadow: st.Shadow, Target: st.Target, Numbers: stageNumbers(st)}
		if st.Target != "" {
			if d, err := time.ParseDuration(st.Target); err == nil {
				ss.TargetMS = float64(d) / float64(time.Millisecond)
			}
		}
		if stg := g.pol.Stage(st.Name); stg != nil {
			ss.Objective = objectiveOf(stg)
		}
		if f, ok := settingFloor(g.cfg, st.Name, st.Kind); ok {
			ss.Floor = &f
		}
		for _, c := range st.Classes {
			k := classKey{st.Name, c.Name}
			tot := ClassCounts{Offered: c.Offered, Admitted: c.Admitted, Rejected: c.Rejected,
				ShadowRejected: c.ShadowRejected, Completed: c.Completed, Errors: c.Errors}
			cp := classPrev{totals: tot}
			sc := SampleClass{Name: c.Name, Totals: tot}
			if c.Last != nil {
				cp.end = c.Last.End
				sc.Last = numbers(c.Last, nil)
			}
			old, had := prev.classes[k]
			switch {
			case c.Last == nil:
			case had && !cp.end.After(old.end) && tot.Offered >= old.totals.Offered:
				// No period ended since the previous sample: the rates
				// of the last periods still stand.
				cp.rates = old.rates
			case had && !old.end.IsZero() && tot.Offered >= old.totals.Offered && tot.Completed >= old.totals.Completed:
				// The periods that ended since: totals over their span.
				span := cp.end.Sub(old.end).Seconds()
				d := func(a, b uint64) float64 { return float64(a-min(a, b)) / span }
				cp.rates = ClassRates{Offered: d(tot.Offered, old.totals.Offered), Admitted: d(tot.Admitted, old.totals.Admitted),
					Rejected: d(tot.Rejected, old.totals.Rejected), ShadowRejected: d(tot.ShadowRejected, old.totals.ShadowRejected),
					Completed: d(tot.Completed, old.totals.Completed), Errors: d(tot.Errors, old.totals.Errors)}
			default:
				// First sight of the class, or a stage rebuilt by a
				// reload: the last period alone (errors are not in it).
				if sec := c.Last.Elapsed.Seconds(); sec > 0 {
					cp.rates = ClassRates{Offered: c.Last.Offered / sec, Admitted: c.Last.Admitted / sec,
						Rejected: c.Last.Rejected / sec, Completed: c.Last.Completed / sec}
				}
			}
			sc.Rates = cp.rates
			cur.classes[k] = cp
			ss.Classes = append(ss.Classes, sc)
		}
		ss.Decisions = h.newDecisions(st.Name, st.Decisions)
		smp.Stages = append(smp.Stages, ss)
	}

	ps := g.pool.State()
	waited, waitNS := g.pool.waits()
	cur.poolRej, cur.waited, cur.waitNS = ps.Queue.Full+ps.Queue.TimedOut, waited, waitNS
	smp.Pool = SamplePool{Capacity: ps.Capacity, InFlight: ps.InFlight, Queue: ps.Queue.Length, QueueMax: ps.Queue.Max,
		QueueTimeout: ps.Queue.Timeout, RejectedPS: perSec(cur.poolRej, prev.poolRej), WaitedPS: perSec(waited, prev.waited)}
	if waited > prev.waited && waitNS >= prev.waitNS && !prev.at.IsZero() {
		smp.Pool.WaitMS = float64(waitNS-prev.waitNS) / float64(waited-prev.waited) / 1e6
	}
	for _, b := range ps.Servers {
		cur.served[b.URL] = b.Served
		smp.Pool.Servers = append(smp.Pool.Servers, SampleBackend{URL: b.URL, InFlight: b.InFlight, Limit: b.MaxConcurrency,
			ServedPS: perSec(b.Served, prev.served[b.URL])})
	}

	if p := doc.Policer; p != nil {
		rej := p.RejectedRate + p.RejectedSource
		cur.pol = [3]uint64{p.Offered, p.Admitted, rej}
		sp := &SamplePolicer{Controller: p.Controller, Rate: p.Rate, Burst: p.Burst, LiveConns: p.LiveConns,
			OfferedPS: perSec(p.Offered, prev.pol[0]), AdmittedPS: perSec(p.Admitted, prev.pol[1]),
			RejectedPS: perSec(rej, prev.pol[2]), GuardError: p.GuardError, Decisions: h.newDecisions("", p.Decisions)}
		if p.Last != nil {
			sp.Last = numbers(p.Last, nil)
		}
		smp.Policer = sp
	}
	for _, r := range doc.Resources {
		k := classKey{r.Stage, r.Resource}
		cur.rules[k] = r.Rejected
		smp.Resources = append(smp.Resources, SampleResource{Stage: r.Stage, Resource: r.Resource, Sensor: r.Sensor,
			Rate: r.Rate, HitsPS: r.HitsPerSec, RejectedPS: perSec(r.Rejected, prev.rules[k]), Input: r.Input,
			SensorError: r.SensorError})
	}
	h.prev = cur
	return smp
}

// newDecisions returns the decisions of ds (oldest first) taken after the
// newest one seen for key, at most sampleDecisions of them.
func (h *history) newDecisions(key string, ds []stage.DecisionState) []stage.DecisionState {
	last := h.lastDecs[key]
	var out []stage.DecisionState
	for _, d := range ds {
		if d.At.After(last) {
			out = append(out, d)
		}
	}
	if len(ds) > 0 {
		h.lastDecs[key] = ds[len(ds)-1].At
	}
	if len(out) > sampleDecisions {
		out = out[len(out)-sampleDecisions:]
	}
	return out
}

// stageNumbers returns the numeric fields of a stage's /state entry
// outside its classes and decisions, by JSON path, so that fields added
// to stage.State show up on the dashboard without changing it.
func stageNumbers(st stage.State) map[string]float64 {
	st.Classes, st.Decisions = nil, nil
	return numbers(st, map[string]bool{"setting": true, "quality": true, "class_rates": true})
}

// numbers flattens the JSON form of v into its finite numeric leaves, by
// dotted path, leaving out the top-level keys in skip.
func numbers(v any, skip map[string]bool) map[string]float64 {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil
	}
	out := map[string]float64{}
	var walk func(prefix string, x any)
	walk = func(prefix string, x any) {
		switch x := x.(type) {
		case float64:
			if !math.IsNaN(x) && !math.IsInf(x, 0) {
				out[prefix] = x
			}
		case map[string]any:
			for k, v := range x {
				if prefix == "" && skip[k] {
					continue
				}
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, v)
			}
		}
	}
	walk("", m)
	for k := range out {
		if strings.HasSuffix(k, "elapsed_ns") {
			out[strings.TrimSuffix(k, "elapsed_ns")+"elapsed_ms"] = out[k] / 1e6
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
