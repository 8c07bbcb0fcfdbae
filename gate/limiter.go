// SPDX-License-Identifier: Apache-2.0

package gate

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

var (
	// ErrQueueFull is returned by Limiter.Acquire when no slot is free and
	// the wait queue is full. It wraps sluice.ErrRejected.
	ErrQueueFull = fmt.Errorf("gate: concurrency limit reached and wait queue full: %w", sluice.ErrRejected)
	// ErrQueueTimeout is returned by Limiter.Acquire when a waiter got no
	// slot within its queue timeout. It wraps sluice.ErrRejected.
	ErrQueueTimeout = fmt.Errorf("gate: queue timeout waiting for a concurrency slot: %w", sluice.ErrRejected)
)

// waiter is one blocked Acquire. ready receives one value when the waiter
// leaves the queue: true when it is granted a slot, false when the queue's
// discipline dropped it (CoDel); the send happens under Limiter.mu, and
// the buffer of 1 keeps it from blocking.
type waiter struct {
	ready chan bool
}

// Limiter is the live, blocking concurrency limit with a bounded FIFO wait
// queue: Slots behind a mutex, with each waiting goroutine parked on its own
// channel. At most Limit requests hold a slot; Acquire waits up to a queue
// timeout in a queue of at most maxQueue waiters, and every freed slot goes
// to the oldest waiter (FIFO; TryAcquire and new Acquires never barge past
// waiters). The queue length is the proxy's "listen queue" signal.
//
// A waiter that gives up (timeout or context cancellation) never keeps a
// slot: if the slot was granted at the same moment it gave up, the slot is
// passed on to the next waiter before Acquire returns its error.
//
// SetDiscipline switches the queue to CoDel and/or adaptive LIFO (see
// Discipline); a waiter CoDel drops gets ErrQueueTimeout at once.
//
// The zero value is not usable; use NewLimiter. A Limiter is safe for
// concurrent use by multiple goroutines. Acquire on a free slot and Release
// allocate nothing.
type Limiter struct {
	mu      sync.Mutex
	slots   *Slots[*waiter]
	timeout time.Duration
	managed bool      // a discipline is set: waiters carry times
	pool    sync.Pool // of *waiter
}

// SetDiscipline sets the queue's serving order and CoDel. Call it before
// the limiter is used.
func (l *Limiter) SetDiscipline(d Discipline) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slots.SetDiscipline(d)
	l.managed = d.LIFO || d.CoDel
}

// clock returns now when the discipline needs times, else the zero time
// (plain FIFO with per-waiter timers reads no clock under the lock).
func (l *Limiter) clock() time.Time {
	if l.managed {
		return time.Now()
	}
	return time.Time{}
}

// notify tells the waiters the discipline dropped that they are out.
func (l *Limiter) notify(now time.Time) {
	if l.managed {
		l.slots.Expire(now, dropWaiter)
	}
}

func dropWaiter(w *waiter) { w.ready <- false }

// NewLimiter returns a Limiter with the given concurrency limit (≥ 1),
// queue bound (≥ 0; 0 rejects at once when no slot is free) and default
// queue timeout (> 0 when maxQueue > 0, otherwise ≥ 0 and unused). The
// error names the bad parameter and its value.
func NewLimiter(limit, maxQueue int, queueTimeout time.Duration) (*Limiter, error) {
	s, err := NewSlots[*waiter](limit, maxQueue)
	if err != nil {
		return nil, err
	}
	if queueTimeout < 0 || (queueTimeout == 0 && maxQueue > 0) {
		return nil, fmt.Errorf("gate: queueTimeout = %v: must be > 0 when maxQueue > 0", queueTimeout)
	}
	return &Limiter{slots: s, timeout: queueTimeout}, nil
}

// TryAcquire takes a slot if one is free and nobody waits, and reports
// whether it did. A true result must be paired with one Release.
func (l *Limiter) TryAcquire() bool {
	l.mu.Lock()
	ok := l.slots.TryAdmit()
	l.mu.Unlock()
	return ok
}

// Acquire takes a slot, waiting in FIFO order for at most timeout (0 means
// the limiter's default queue timeout) if none is free. It returns nil when
// the caller holds a slot, which it must give back with Release;
// ErrQueueFull if the queue is full; ErrQueueTimeout if the wait timed out;
// ctx.Err() if ctx ended while waiting (or before queueing). A negative
// timeout is an error. A free slot is taken even if ctx has already ended.
func (l *Limiter) Acquire(ctx context.Context, timeout time.Duration) error {
	if timeout < 0 {
		return fmt.Errorf("gate: Acquire timeout = %v: must be >= 0", timeout)
	}
	l.mu.Lock()
	if l.slots.TryAdmit() {
		l.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		l.mu.Unlock()
		return err
	}
	timeout = cmp.Or(timeout, l.timeout)
	w := l.getWaiter()
	now := l.clock()
	// Without a discipline, waiters carry no deadline in Slots: the timer
	// below is the only expiry, so Slots never drops a waiter behind its
	// goroutine's back. With one, CoDel may drop it (notify tells it).
	switch l.slots.Arrive(now, w, time.Time{}) {
	case Admitted: // unreachable after TryAdmit failed, but harmless
		l.mu.Unlock()
		l.pool.Put(w)
		return nil
	case Rejected:
		l.notify(now)
		l.mu.Unlock()
		l.pool.Put(w)
		return ErrQueueFull
	}
	if l.managed && l.slots.Standing(now) && l.slots.Discipline().CoDel {
		timeout = min(timeout, l.slots.Discipline().Target)
	}
	l.notify(now)
	l.mu.Unlock()

	timer := time.NewTimer(timeout)
	var err error
	select {
	case granted := <-w.ready:
		timer.Stop()
		l.pool.Put(w)
		if !granted {
			return ErrQueueTimeout
		}
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = ErrQueueTimeout
	}
	timer.Stop()

	l.mu.Lock()
	removed := l.slots.Remove(w)
	if !removed {
		// The waiter left the queue while we were giving up: granted (pass
		// the slot on) or dropped; either way the value is in the buffer.
		if <-w.ready {
			l.releaseLocked()
		}
	}
	l.mu.Unlock()
	l.pool.Put(w)
	return err
}

func (l *Limiter) getWaiter() *waiter {
	if w, ok := l.pool.Get().(*waiter); ok {
		return w
	}
	return &waiter{ready: make(chan bool, 1)}
}

// Release gives back a slot taken by a successful TryAcquire or Acquire,
// handing it to the oldest waiter if there is one. A Release with no slot
// held does nothing.
func (l *Limiter) Release() {
	l.mu.Lock()
	l.releaseLocked()
	l.mu.Unlock()
}

func (l *Limiter) releaseLocked() {
	now := l.clock()
	if w, ok := l.slots.Release(now); ok {
		w.ready <- true
	}
	l.notify(now)
}

// SetLimit sets the concurrency limit (≥ 1; on error it is unchanged).
// Raising it wakes the oldest waiters that now fit; lowering it revokes no
// held slot, so InFlight may exceed Limit for a while.
func (l *Limiter) SetLimit(n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.slots.SetLimit(n); err != nil {
		return err
	}
	now := l.clock()
	defer l.notify(now)
	for {
		w, ok := l.slots.Next(now)
		if !ok {
			return nil
		}
		w.ready <- true
	}
}

// InFlight returns the number of slots held.
func (l *Limiter) InFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slots.InFlight()
}

// QueueLen returns the number of goroutines waiting for a slot.
func (l *Limiter) QueueLen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slots.QueueLen()
}

// Limit returns the concurrency limit.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slots.Limit()
}

// QueueTimeout returns the default queue timeout.
func (l *Limiter) QueueTimeout() time.Duration { return l.timeout }
