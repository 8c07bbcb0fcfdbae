// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/ctxsleep"
)

// Dashboard is the live dashboard of one server: the history its sampler
// fills from the server's View, the page and the event stream that send
// it to browsers (ServePage, ServeEvents), and its metrics (Register).
// A Dashboard is safe for concurrent use, but only one sampler may run:
// Run, or a caller of SampleAt, not both.
type Dashboard struct {
	view   View
	hist   *history
	access Access
	errorf func(w http.ResponseWriter, status int, msg string)
	log    *slog.Logger
}

// Access decides who may see the dashboard; the proxy's admin token
// implements it. Its methods are called by the handlers' goroutines
// concurrently.
type Access interface {
	// Allowed reports whether r may see the dashboard. page is true for
	// the page itself, which may also carry the token in its query
	// (?token=), false for the event stream.
	Allowed(r *http.Request, page bool) bool
	// Grant lets the browser that was just allowed the page in again
	// without the token (the proxy's session cookie): it is called on
	// the page's answer before anything is written.
	Grant(w http.ResponseWriter)
}

// Options configure a Dashboard. The zero value is usable.
type Options struct {
	// Access guards the page and the event stream (nil: every request
	// may see them).
	Access Access
	// Error writes an error answer with status and msg: the event
	// stream's 401, the 503 past MaxViewers, a page that cannot be built
	// (nil: http.Error's plain text). The proxy writes the admin API's
	// JSON errors.
	Error func(w http.ResponseWriter, status int, msg string)
	// Logger receives the sampler's warnings (nil: slog.Default()).
	Logger *slog.Logger
}

// New returns the dashboard of the server that v shows, with an empty
// history and a new boot id (random), which the event stream's ids carry
// so that a browser can tell a restarted server.
func New(v View, opts Options) *Dashboard {
	d := &Dashboard{view: v, hist: newHistory(), access: opts.Access, errorf: opts.Error, log: opts.Logger}
	if d.errorf == nil {
		d.errorf = func(w http.ResponseWriter, status int, msg string) { http.Error(w, msg, status) }
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	return d
}

// Run samples the view every HistoryInterval, the first time at once,
// until ctx ends; then it closes the history, which ends every event
// stream. Call it once, on its own goroutine.
func (d *Dashboard) Run(ctx context.Context) {
	defer d.hist.close()
	d.SampleAt(time.Now())
	ctxsleep.Every(ctx, HistoryInterval, func(now time.Time) { d.SampleAt(now) })
}

// SampleAt takes the sample of time now from the view, encodes it, keeps
// it in the history and wakes the event streams, which send it. It
// returns the sample and its encoding as kept; a sample that cannot be
// encoded is logged and not kept (its encoding is then nil). Run calls
// it; a server whose loops are driven by hand (tests) calls it instead.
// It must not be called concurrently with itself or Run.
func (d *Dashboard) SampleAt(now time.Time) (*Sample, []byte) {
	smp := d.hist.take(d.view, now)
	b, err := json.Marshal(smp)
	if err != nil {
		d.log.Warn("dashboard: encoding a sample", "err", err)
		return smp, nil
	}
	d.hist.pushSample(b, decisionCounts(smp))
	return smp, b
}
