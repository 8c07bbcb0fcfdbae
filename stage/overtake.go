// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"slices"
	"sync"
	"time"
)

// overtakeMeter measures Measurements.Parallel: when a request leaves
// service, the number of requests still in service that entered it
// before, and the largest of those counts over an interval. live holds
// the requests in service in the order they entered it, so a request's
// count is its index there.
//
// Behind a service of W workers that serves its queue in the order
// requests arrive (a worker pool: a thread pool, HAProxy's maxconn, the
// lab's testbed queue), a request that waited inside the service took a
// worker when the requests ahead of it had left but W − 1, so with n in
// service it overtakes at most min(n, W) − 1, and a short request among
// many reaches that bound. A service that shares its workers among all
// requests (processor sharing) lets a short request overtake every one,
// and the count says nothing: control/auto/overtake.go reads it only
// where it is below the number in service.
//
// The order seen here is not quite the service's, and the largest count
// reads any error as an overtake the workers never made:
//   - A request enters service at admission, unless its caller reports
//     the moment it handed the request to the service (Ticket.Sent: the
//     proxy does when it has written the request to the backend); it then
//     takes its place in the order at that moment. Requests admitted in
//     one order reach a backend in another (queued requests' goroutines
//     wake, connections are taken and written in their own order).
//   - Requests handed over less than τ/2 apart may still reach the
//     service's queue in either order (its own goroutines), and answers
//     less than τ apart may be read in either order (the service writes
//     a batch of them, the proxy's goroutines read them as they are
//     scheduled). So a request does not count as overtaken by one that
//     entered service less than τ/2 after it, nor by one that left less
//     than τ before it: a count is final τ after its request left.
//
// τ is the stage's tolerance, auto.Config.KneeTolerance (its default is
// given there), but at most half the mean time between completions, 1/(2·X̂) for the
// completion rate X̂ (smoothed per interval): a wider tolerance would
// forgive true overtakes, where the service completes requests faster
// than its order can be observed.
//
// A service may be several servers, each with its own workers and queue
// (a proxy's pool of backends): a request sent to one server overtakes
// the requests of a slower one whatever their workers, so counts are
// kept per server, among the requests sent to the same one (Ticket.SentTo
// names it; 0 when the caller does not), and the interval's reading is
// the sum over the servers that completed requests in it of one more than
// their largest count: Σ_s min(n_s, W_s), the workers of the whole
// service.
type overtakeMeter struct {
	mu   sync.Mutex
	next uint64         // the next sequence number
	live []overtakeItem // the requests in service, in service order
	most []int          // per server, the largest final count since the last collect; −1: none

	tolMax  time.Duration   // the configured tolerance (0: exact order)
	tol     time.Duration   // τ in force: min(tolMax, 1/(2·X̂))
	pending []overtakeCount // counts of requests that left less than τ ago
	ends    int             // requests that left service since the last collect
	last    time.Time       // the last collect (zero: none)
	rate    float64         // X̂, completions/s (0: not yet measured)

	// The backend's share of the slot time, over the completions that
	// reported both their send and their answer's first byte since the
	// last collect: Σ (first byte − sent) and Σ (left − admitted), s.
	inBackend, inSlot float64
}

// overtakeItem is a request in service: its sequence number, when it
// entered service (admitted, or sent), when it was admitted, and when the
// first byte of its answer arrived (zero: not reported).
type overtakeItem struct {
	seq       uint64
	at        time.Time
	admit     time.Time
	sent      bool
	server    int
	firstByte time.Time
}

// overtakeCount is a request that entered service at in at server and
// left at out, with count earlier requests of that server still in
// service then; it is final at out + τ.
type overtakeCount struct {
	in, out time.Time
	server  int
	count   int
}

// maxOvertakeServers bounds the servers the meter tells apart; higher
// numbers share the last one's count.
const maxOvertakeServers = 1024

// newOvertakeMeter returns a meter of tolerance tol (0: the exact order).
func newOvertakeMeter(tol time.Duration) *overtakeMeter {
	tol = max(tol, 0)
	return &overtakeMeter{tolMax: tol, tol: tol}
}

// begin records a request entering service at now and returns its
// sequence number.
func (o *overtakeMeter) begin(now time.Time) uint64 {
	o.mu.Lock()
	seq := o.next
	o.next++
	o.live = append(o.live, overtakeItem{seq: seq, at: now, admit: now})
	o.mu.Unlock()
	return seq
}

// sent moves the request of sequence number seq to the end of the
// service order: it was handed to server (≥ 0) at now, after every
// request in service. It does nothing once the request left service.
func (o *overtakeMeter) sent(seq uint64, now time.Time, server int) {
	server = min(max(server, 0), maxOvertakeServers-1)
	o.mu.Lock()
	// A request is sent soon after it is admitted: search from the end.
	for i := len(o.live) - 1; i >= 0; i-- {
		if it := o.live[i]; it.seq == seq {
			copy(o.live[i:], o.live[i+1:])
			it.at, it.sent, it.server, it.firstByte = now, true, server, time.Time{}
			o.live[len(o.live)-1] = it
			break
		}
	}
	o.mu.Unlock()
}

// answered records the first byte of the answer to the request of
// sequence number seq arriving at now.
func (o *overtakeMeter) answered(seq uint64, now time.Time) {
	o.mu.Lock()
	for i := len(o.live) - 1; i >= 0; i-- {
		if o.live[i].seq == seq {
			if o.live[i].sent && o.live[i].firstByte.IsZero() {
				o.live[i].firstByte = now
			}
			break
		}
	}
	o.mu.Unlock()
}

// end records the request of sequence number seq leaving service at now.
// Its count is the number of requests of its server before it in the
// service order that entered at least τ/2 before it, less those of them
// that leave within τ after now.
func (o *overtakeMeter) end(seq uint64, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.settle(now)
	// Requests mostly leave in about the order they entered: search from
	// the start.
	i := slices.IndexFunc(o.live, func(it overtakeItem) bool { return it.seq == seq })
	if i < 0 {
		return
	}
	o.ends++
	if it := o.live[i]; it.sent && !it.firstByte.IsZero() {
		o.inBackend += it.firstByte.Sub(it.at).Seconds()
		o.inSlot += now.Sub(it.admit).Seconds()
	}
	in, srv := o.live[i].at, o.live[i].server
	cut := in.Add(-o.tol / 2)
	n := 0
	for _, it := range o.live[:i] {
		if it.server == srv && !it.at.After(cut) {
			n++
		}
	}
	o.live = slices.Delete(o.live, i, i+1)
	if o.tol <= 0 {
		o.record(srv, n)
		return
	}
	// The requests of its server that left less than τ ago and counted
	// this one did not overtake it.
	for k, p := range o.pending {
		if p.server == srv && !in.After(p.in.Add(-o.tol/2)) {
			o.pending[k].count--
		}
	}
	o.pending = append(o.pending, overtakeCount{in: in, out: now, server: srv, count: n})
}

// record makes count a final count of server.
func (o *overtakeMeter) record(server, count int) {
	for len(o.most) <= server {
		o.most = append(o.most, -1)
	}
	o.most[server] = max(o.most[server], count)
}

// settle makes final the counts of the requests that left at least τ
// before now.
func (o *overtakeMeter) settle(now time.Time) {
	k := 0
	for _, p := range o.pending {
		if now.Sub(p.out) >= o.tol {
			o.record(p.server, p.count)
			continue
		}
		o.pending[k] = p
		k++
	}
	o.pending = o.pending[:k]
}

// collect returns the sum over the servers of one more than their largest
// final count since the last collect (0 when none became final) and the
// backend's share of the slot time (0: unknown), and starts the next
// interval: the completion rate and τ are updated from the interval's
// completions.
func (o *overtakeMeter) collect(now time.Time) (parallel, share float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.settle(now)
	for s, m := range o.most {
		parallel += float64(m + 1)
		o.most[s] = -1
	}
	if o.inSlot > 0 {
		share = min(o.inBackend/o.inSlot, 1)
	}
	o.inBackend, o.inSlot = 0, 0
	if el := now.Sub(o.last).Seconds(); !o.last.IsZero() && el > 0 {
		x := float64(o.ends) / el
		if o.rate == 0 {
			o.rate = x
		} else {
			o.rate += 0.2 * (x - o.rate)
		}
	}
	o.last, o.ends = now, 0
	o.tol = o.tolMax
	if o.rate > 0 {
		o.tol = min(o.tolMax, time.Duration(float64(time.Second)/(2*o.rate)))
	}
	return parallel, share
}
