package stage

// Long-lived requests (WebSocket upgrades, event streams, downloads that go
// on beyond a stage's long-lived limit) must neither hold a concurrency
// slot until they end nor feed the response-time windows. A caller that
// detects such a request calls Stream on its ticket and later finishes it
// with DoneStream instead of Done.

// Stream releases the concurrency slot the ticket holds, if any, because
// its request has become long-lived. The ticket is not changed (it is a
// value): after Stream, finish the request with DoneStream, never with
// Done or DoneAfter, which would release the slot a second time. Call
// Stream at most once per ticket. It is safe to call concurrently with
// other tickets' methods, and with DoneStream on the same ticket.
func (t Ticket) Stream() {
	if t.s != nil && t.held {
		t.s.limiter.Release()
	}
}

// DoneStream records the end of a request whose ticket went through
// Stream: it completes (counted as an error when ok is false) but is never
// a response-time sample, and it releases no slot.
func (t Ticket) DoneStream(ok bool) {
	t.held = false
	t.DoneAfter(0, ok, false)
}

// Held reports whether the ticket holds a concurrency slot of its stage's
// limit (only stages whose controller limits concurrency have one).
func (t Ticket) Held() bool { return t.held }
