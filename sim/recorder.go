package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// RecorderConfig configures a Recorder. The zero value records counts and
// response times only.
type RecorderConfig struct {
	// Busy returns a cumulative busy time in seconds (Station.Busy); the
	// period's utilization is its increase divided by the period length.
	// nil leaves Utilization NaN.
	Busy func() float64
	// Queue returns the queue length to report (for example a FIFO's
	// Waiting, or a link's Backlog normalised by the scenario). nil leaves
	// Queue NaN.
	Queue func() float64
	// QueueSamples is how many times per period Start samples Queue, evenly
	// spaced, the last at the period's end; Row.Queue is their mean. 0 or 1
	// means one sample at the end of the period. ≥ 0.
	QueueSamples int
}

// Validate reports the first invalid field, or nil.
func (c RecorderConfig) Validate() error {
	if c.QueueSamples < 0 {
		return fmt.Errorf("sim: RecorderConfig.QueueSamples = %d: must be ≥ 0", c.QueueSamples)
	}
	return nil
}

// Row is what a Recorder saw in one period.
type Row struct {
	// Start and End bound the period in virtual time.
	Start, End time.Duration
	// Offered, Admitted and Rejected count requests at the gate (or, for
	// a client-side recorder, requests sent and rejected).
	Offered, Admitted, Rejected int
	// Completed counts requests that finished served in full; each is one
	// response-time sample.
	Completed int
	// Failed counts tracked requests that finished otherwise (timed out or
	// refused after admission, for example by a full listen queue).
	Failed int
	// MeanRT and P90RT are the mean and the exact 90th percentile (nearest
	// rank) of the response times of the completed requests, in seconds;
	// NaN when none completed.
	MeanRT, P90RT float64
	// MaxRT is the largest response time in seconds; NaN when none
	// completed.
	MaxRT float64
	// Utilization is the busy fraction over the period in [0, 1]; NaN
	// without a Busy source.
	Utilization float64
	// Queue is the mean of the period's queue samples; NaN without a Queue
	// source.
	Queue float64
}

// Measurements converts the row to what a controller's Update takes.
func (w Row) Measurements() sluice.Measurements {
	return sluice.Measurements{
		Elapsed:     w.End - w.Start,
		Arrivals:    float64(w.Offered),
		Admitted:    float64(w.Admitted),
		Rejected:    float64(w.Rejected),
		Completed:   float64(w.Completed),
		Samples:     float64(w.Completed),
		MeanRT:      w.MeanRT,
		P90RT:       w.P90RT,
		Utilization: w.Utilization,
		Queue:       w.Queue,
	}
}

// RowHeader names the columns of Row.Record, for CSV output.
var RowHeader = []string{"time_s", "offered", "admitted", "rejected", "completed", "failed",
	"mean_rt_ms", "p90_rt_ms", "max_rt_ms", "utilization", "queue"}

// Record returns the row as CSV fields matching RowHeader: time is the
// period's end in seconds, response times in milliseconds, NaN as "NaN".
func (w Row) Record() []string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', 8, 64) }
	i := strconv.Itoa
	return []string{f(w.End.Seconds()), i(w.Offered), i(w.Admitted), i(w.Rejected), i(w.Completed),
		i(w.Failed), f(w.MeanRT * 1e3), f(w.P90RT * 1e3), f(w.MaxRT * 1e3), f(w.Utilization), f(w.Queue)}
}

// Recorder collects per-period rows: counts, response-time statistics,
// utilization and a queue gauge. Stages feed it (Gate does so itself; see
// Offer, Admit, Reject, Complete, Fail, Track); Flush closes a period and
// Start flushes periodically.
type Recorder struct {
	e        *Engine
	cfg      RecorderConfig
	start    time.Duration
	busy0    float64
	cur      Row
	rts      []float64
	qsum     float64
	qn       int
	rows     []Row
	track    func(r *Request)
	ticker   *Ticker
	period   time.Duration
	samples  []Timer
	sampleFn func()
	onRow    func(Row)
}

// NewRecorder returns a recorder whose first period starts at Now.
func NewRecorder(e *Engine, cfg RecorderConfig) (*Recorder, error) {
	if err := checkEngine("NewRecorder", e); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rec := &Recorder{e: e, cfg: cfg}
	rec.track = rec.onFinish
	rec.reset()
	return rec, nil
}

func (rec *Recorder) reset() {
	rec.start = rec.e.Now()
	if rec.cfg.Busy != nil {
		rec.busy0 = rec.cfg.Busy()
	}
	rec.cur = Row{}
	rec.rts = rec.rts[:0]
	rec.qsum, rec.qn = 0, 0
}

// Offer counts an offered request.
func (rec *Recorder) Offer() { rec.cur.Offered++ }

// Admit counts an admitted request.
func (rec *Recorder) Admit() { rec.cur.Admitted++ }

// Reject counts a rejected request.
func (rec *Recorder) Reject() { rec.cur.Rejected++ }

// Complete counts a completed request and its response time.
func (rec *Recorder) Complete(rt time.Duration) {
	rec.cur.Completed++
	rec.rts = append(rec.rts, rt.Seconds())
}

// Fail counts a request that finished without completing.
func (rec *Recorder) Fail() { rec.cur.Failed++ }

// Track arranges for r's end to be recorded: Complete with its response
// time if it completes, Fail otherwise.
func (rec *Recorder) Track(r *Request) { r.Defer(rec.track) }

func (rec *Recorder) onFinish(r *Request) {
	if r.Outcome == Completed {
		rec.Complete(r.ResponseTime())
		return
	}
	rec.Fail()
}

// Samples returns the number of response-time samples in the current
// period so far: the count behind SEDA's nreq trigger.
func (rec *Recorder) Samples() int { return len(rec.rts) }

// SampleQueue takes one queue sample now.
func (rec *Recorder) SampleQueue() {
	if rec.cfg.Queue != nil {
		rec.qsum += rec.cfg.Queue()
		rec.qn++
	}
}

// Flush closes the current period at Now, appends its row to Rows and
// returns it; the next period starts at Now. Without queue samples in the
// period it takes one.
func (rec *Recorder) Flush() Row {
	w := rec.cur
	w.Start, w.End = rec.start, rec.e.Now()
	w.MeanRT, w.P90RT, w.MaxRT = math.NaN(), math.NaN(), math.NaN()
	if n := len(rec.rts); n > 0 {
		slices.Sort(rec.rts)
		sum := 0.0
		for _, x := range rec.rts {
			sum += x
		}
		w.MeanRT = sum / float64(n)
		w.P90RT = rec.rts[int(math.Ceil(0.9*float64(n)))-1]
		w.MaxRT = rec.rts[n-1]
	}
	w.Utilization = math.NaN()
	if rec.cfg.Busy != nil {
		if dt := (w.End - w.Start).Seconds(); dt > 0 {
			w.Utilization = math.Min(math.Max((rec.cfg.Busy()-rec.busy0)/dt, 0), 1)
		}
	}
	w.Queue = math.NaN()
	if rec.cfg.Queue != nil {
		if rec.qn == 0 {
			rec.SampleQueue()
		}
		w.Queue = rec.qsum / float64(rec.qn)
	}
	rec.rows = append(rec.rows, w)
	rec.reset()
	return w
}

// Start flushes every period h from Now on, calling onRow (if not nil)
// with each row, and samples the queue QueueSamples times per period, at
// h/n, 2h/n, …, h after the period's start. The first period starts at
// Now (counts recorded before Start are discarded). Use onRow to run a
// controller step: its Update sees the row's Measurements at the period's
// end. An event at exactly a period boundary that was scheduled before
// the flush falls into the next period.
func (rec *Recorder) Start(h time.Duration, onRow func(Row)) error {
	if rec.ticker != nil {
		return fmt.Errorf("sim: Recorder already started")
	}
	if h <= 0 {
		return fmt.Errorf("sim: Recorder.Start: period %v must be positive", h)
	}
	if n := rec.cfg.QueueSamples; n > 1 && h < time.Duration(n) {
		return fmt.Errorf("sim: Recorder.Start: period %v too short for %d queue samples", h, n)
	}
	rec.reset()
	rec.onRow = onRow
	rec.period = h
	rec.sampleFn = rec.SampleQueue
	var err error
	if rec.ticker, err = rec.e.Every(h, rec.tick); err != nil {
		return err
	}
	rec.scheduleSamples()
	return nil
}

// scheduleSamples schedules the period's intermediate queue samples.
func (rec *Recorder) scheduleSamples() {
	rec.samples = rec.samples[:0]
	n := int64(rec.cfg.QueueSamples)
	if n <= 1 || rec.cfg.Queue == nil {
		return
	}
	from := rec.e.Now()
	for k := int64(1); k < n; k++ {
		at := from + time.Duration(int64(rec.period)/n*k+int64(rec.period)%n*k/n)
		rec.samples = append(rec.samples, rec.e.Schedule(at, rec.sampleFn))
	}
}

func (rec *Recorder) tick() {
	rec.SampleQueue()
	w := rec.Flush()
	rec.scheduleSamples()
	if rec.onRow != nil {
		rec.onRow(w)
	}
}

// Stop stops periodic flushing.
func (rec *Recorder) Stop() {
	if rec.ticker != nil {
		rec.ticker.Stop()
		rec.ticker = nil
	}
	for _, t := range rec.samples {
		t.Stop()
	}
	rec.samples = nil
}

// Rows returns the rows flushed so far (the slice is shared; do not
// modify it).
func (rec *Recorder) Rows() []Row { return rec.rows }
