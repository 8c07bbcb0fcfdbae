package stage

import (
	"slices"
	"sync"
)

// overtakeMeter measures Measurements.Parallel: when a request leaves
// service, the number of requests still in service that entered it
// before, and the largest of those counts over an interval. Each request
// in service holds a sequence number in the order it entered service;
// live holds them ascending, so a request's count is its index there.
//
// Behind a service of W workers that serves its queue in the order
// requests arrive (a worker pool: a thread pool, HAProxy's maxconn, the
// lab's testbed queue), a request that waited inside the service took a
// worker when the requests ahead of it had left but W − 1, so with n in
// service it overtakes at most min(n, W) − 1, and a short request among
// many reaches that bound. A service that shares its workers among all
// requests (processor sharing) lets a short request overtake every one,
// and the count says nothing: control/auto_overtake.go reads it only
// where it is below the number in service.
type overtakeMeter struct {
	mu   sync.Mutex
	next uint64   // the next sequence number
	live []uint64 // sequence numbers of the requests in service, ascending
	most int      // the largest count since the last collect; −1: none
}

func newOvertakeMeter() *overtakeMeter { return &overtakeMeter{most: -1} }

// begin records a request entering service and returns its sequence
// number.
func (o *overtakeMeter) begin() uint64 {
	o.mu.Lock()
	seq := o.next
	o.next++
	o.live = append(o.live, seq)
	o.mu.Unlock()
	return seq
}

// end records the request of sequence number seq leaving service.
func (o *overtakeMeter) end(seq uint64) {
	o.mu.Lock()
	if i, ok := slices.BinarySearch(o.live, seq); ok {
		o.live = slices.Delete(o.live, i, i+1)
		o.most = max(o.most, i)
	}
	o.mu.Unlock()
}

// collect returns one more than the largest count since the last
// collect (0 when no request left service) and starts the next interval.
func (o *overtakeMeter) collect() float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := float64(o.most + 1)
	o.most = -1
	return v
}
