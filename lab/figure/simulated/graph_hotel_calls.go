// SPDX-License-Identifier: Apache-2.0

package simulated

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/lab/figure"
	"github.com/sluicehq/sluice/lab/peers"
	"github.com/sluicehq/sluice/lab/sim"
)

// The callers' side of graph-hotel in virtual time: a call from an end
// user or a service to a service, through the row's client side.

// hotelPushback is the retry delay of a sluice stage's refusal
// (RESOURCE_EXHAUSTED's RetryInfo: the policy's reject.retry_after, 1 s
// by default).
const hotelPushback = time.Second

// hside is a caller's client side toward a service (sluice's, one per
// gRPC target) or toward one of its instances (a peer's, per
// connection); neither for the none row.
type hside struct {
	dest *client.Dest
	cl   peers.Client
}

func (h *hotel) newSide(from *hinst, to int) (*hside, error) {
	sd := &hside{}
	switch {
	case h.ccfg != nil:
		sd.dest = client.NewDest(h.ccfg)
	case h.peer != nil:
		name := ""
		if from != nil {
			name = h.g.Services[from.svc].Name
		}
		cl, err := h.peer.Client(name, h.g.Services[to].Name)
		if err != nil {
			return nil, err
		}
		if sd.cl = cl; cl != nil {
			if err := h.addClient(cl); err != nil {
				return nil, err
			}
		}
	}
	return sd, nil
}

// hcall is one call through a client side: for sluice's, a call and its
// retries (client.Call); for a peer's, one attempt that may first wait
// in the peer's queue; for none, one attempt. The call's deadline ends
// it; a caller that leaves cancels it.
type hcall struct {
	h    *hotel
	side *hside
	// to are the instances the call may go to: the entry's for an end
	// user (round robin), the one picked for a service's call.
	to               []*hinst
	api, user, class int
	step             *figure.HotelStep
	deadline         time.Duration
	fwd              peers.Metadata
	userID           string
	// end reports the call's end once: its code and a refusal's retry
	// delay (−1: none).
	end func(code figure.HotelCode, pushback time.Duration)

	cur      *sim.Request
	timer    sim.Timer // the deadline
	wait     sim.Timer // a retry's back-off
	over     bool
	call     client.Call
	pc       *peers.Call
	waiting  bool
	last     figure.HotelCode
	lastPush time.Duration
}

// start begins the call.
func (k *hcall) start() {
	h := k.h
	now := h.e.Time()
	k.timer = h.e.Schedule(k.deadline, k.expire)
	k.last, k.lastPush = figure.HotelTimeout, -1
	switch {
	case k.side.dest != nil:
		switch k.call.Begin(k.side.dest, now, true, h.at(k.deadline), h.rng) {
		case client.Throttled:
			// grpcsluice's errThrottled: RESOURCE_EXHAUSTED, no RetryInfo.
			k.finish(figure.HotelRejected, -1)
		case client.Late:
			k.finish(figure.HotelTimeout, -1)
		default:
			k.send(nil)
		}
	case k.side.cl != nil:
		svc := k.to[0].svc
		k.pc = &peers.Call{ID: h.id(), Method: h.g.Method(k.api, svc), User: k.userID, Deadline: h.at(k.deadline), Meta: k.fwd}
		d := k.side.cl.Send(now, k.pc)
		switch d.Verdict {
		case peers.Send:
			k.send(d.Meta)
		case peers.Deny:
			k.finish(figure.HotelRejected, -1)
		default:
			k.waiting = true
			h.pend[k.pc] = k
		}
	default:
		k.send(nil)
	}
}

// send sends an attempt, delivered as its own event.
func (k *hcall) send(meta peers.Metadata) {
	h := k.h
	if k.pc != nil {
		k.pc.Sent = h.e.Time()
	}
	in := k.to[0]
	if len(k.to) > 1 {
		in = k.to[h.entryRR%len(k.to)]
		h.entryRR++
	}
	r := &sim.Request{ID: h.e.NextID(), Class: k.class, Sent: h.e.Now(), User: -1, Deadline: k.deadline,
		Data: &hreq{api: k.api, user: k.user, class: k.class, userID: k.userID, step: k.step, meta: meta, pushback: -1}}
	r.OnFinish = k.answered
	k.cur = r
	h.e.After(0, func() {
		if !r.Done() && !r.Canceled() {
			in.arrive(r)
			return
		}
		// The caller left before the call arrived: it never does.
		r.Finish(h.e.Now(), sim.Rejected)
	})
}

// answered takes an attempt's answer.
func (k *hcall) answered(r *sim.Request) {
	if r != k.cur || k.over {
		return
	}
	k.cur = nil
	h := k.h
	d := r.Data.(*hreq)
	code, push := d.code, d.pushback
	if r.Outcome != sim.Completed && code == figure.HotelOK {
		code = figure.HotelRejected
	}
	k.last, k.lastPush = code, push
	now := h.e.Time()
	switch {
	case k.side.dest != nil:
		stop, wait := k.call.Done(now, judge(code, push), h.rng)
		if stop != client.StopRetry {
			k.finish(code, push)
			return
		}
		if wait <= 0 {
			k.send(nil)
			return
		}
		k.wait = h.e.After(wait, func() { k.send(nil) })
	case k.side.cl != nil:
		h.dispatch(k.side.cl.Received(now, k.pc, d.reply, peerOutcome(code)))
		k.finish(code, push)
	default:
		k.finish(code, push)
	}
}

// judge is how grpcsluice.Judge judges the gRPC status of code: OK;
// RESOURCE_EXHAUSTED, a refusal, retryable after its RetryInfo when it
// has one; DEADLINE_EXCEEDED and others neither.
func judge(code figure.HotelCode, pushback time.Duration) client.Result {
	r := client.Result{Judged: true}
	if code == figure.HotelRejected {
		r.Refused = true
		if pushback >= 0 {
			r.RetryAfter, r.HasRetryAfter, r.Retryable = pushback, true, true
		}
	}
	return r
}

func peerOutcome(code figure.HotelCode) peers.Outcome {
	switch code {
	case figure.HotelOK:
		return peers.OK
	case figure.HotelRejected:
		return peers.Rejected
	case figure.HotelTimeout:
		return peers.Canceled
	}
	return peers.Failed
}

// expire is the call's deadline: the attempt in flight is abandoned (the
// callee sees its caller leave), a call waiting in a peer's queue leaves
// it, and a call waiting for a retry ends with its last answer.
func (k *hcall) expire() { k.stop(true) }

// cancel: the caller's own caller left (its context ended).
func (k *hcall) cancel() { k.stop(false) }

func (k *hcall) stop(atDeadline bool) {
	if k.over {
		return
	}
	h := k.h
	now := h.e.Time()
	code, push := figure.HotelTimeout, time.Duration(-1)
	switch {
	case k.cur != nil:
		r := k.cur
		k.cur = nil
		if k.side.dest != nil {
			k.call.Done(now, client.Result{Outcome: sluice.Ignore}, nil)
		}
		if k.side.cl != nil {
			h.dispatch(k.side.cl.Received(now, k.pc, nil, peers.Canceled))
		}
		r.Cancel()
	case k.waiting:
		k.waiting = false
		delete(h.pend, k.pc)
		h.dispatch(k.side.cl.Cancel(now, k.pc))
	case atDeadline:
		code, push = k.last, k.lastPush
	}
	k.finish(code, push)
}

func (k *hcall) finish(code figure.HotelCode, push time.Duration) {
	if k.over {
		return
	}
	k.over = true
	k.timer.Stop()
	k.wait.Stop()
	k.end(code, push)
}

// dispatch carries out a peer client side's releases.
func (h *hotel) dispatch(rs []peers.Release) {
	for _, r := range rs {
		k := h.pend[r.Call]
		if k == nil {
			continue
		}
		delete(h.pend, r.Call)
		k.waiting = false
		if k.over {
			continue
		}
		if r.Decision.Verdict == peers.Send {
			k.send(r.Decision.Meta)
		} else {
			k.finish(figure.HotelRejected, -1)
		}
	}
}
