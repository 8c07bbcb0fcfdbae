// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"crypto/rand"
	"embed"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The page and its event stream, which the proxy serves on its admin
// listener:
//
//	GET /ui         one self-contained page (uPlot and the page's script
//	                inlined; it loads nothing else): ServePage
//	GET /ui/events  Server-Sent Events: the kept history, then one
//	                sample a second (event "sample", id BOOT-SEQ; resume
//	                with Last-Event-ID or ?since=BOOT-SEQ): ServeEvents
//
// The page's changes go to the proxy's admin API (PUT /shadow, PUT
// /stages/{name}/target), not here. With admin.token set, /ui needs the
// token once — as "Authorization: Bearer TOKEN" or as ?token=TOKEN,
// which the page then removes from the address bar and keeps in the
// tab's sessionStorage — and answers with an HttpOnly, SameSite=Strict
// session cookie for /ui that the page's reloads and the event stream
// use (the proxy's Access). Changes (PUT, POST) need the Authorization
// header itself; the page sends it.

//go:embed ui/index.html ui/vendor/uplot/uPlot.iife.min.js ui/vendor/uplot/uPlot.min.css ui/vendor/uplot/LICENSE
var uiFiles embed.FS

// MaxViewers bounds the event streams open at once in the process (all
// dashboards together); more get 503.
const MaxViewers = 64

// uiWriteTimeout bounds one write to a viewer: a viewer that does not
// read for that long is dropped (its browser reconnects).
const uiWriteTimeout = 10 * time.Second

// uiWriteChunk is about the most of the backlog an event stream buffers
// before writing it, in bytes.
const uiWriteChunk = 64 << 10

var uiPage = sync.OnceValues(func() (string, error) {
	var files [4]string // the page, uPlot's script, its style sheet, its licence
	for i, name := range []string{"ui/index.html", "ui/vendor/uplot/uPlot.iife.min.js", "ui/vendor/uplot/uPlot.min.css", "ui/vendor/uplot/LICENSE"} {
		b, err := uiFiles.ReadFile(name)
		if err != nil {
			return "", err
		}
		files[i] = string(b)
	}
	page, js, css, lic := files[0], files[1], files[2], files[3]
	if strings.Contains(strings.ToLower(js), "</script") || strings.Contains(strings.ToLower(css), "</style") {
		return "", fmt.Errorf("the vendored uPlot cannot be inlined: it contains a closing tag")
	}
	lic = strings.ReplaceAll(lic, "*/", "* /")
	page = strings.Replace(page, "/*UPLOT_CSS*/", css, 1)
	page = strings.Replace(page, "/*UPLOT_JS*/", "/*! uPlot 1.6.32\n"+lic+"*/\n"+js, 1)
	return page, nil
})

// allowed reports whether r may see the dashboard (Options.Access).
func (d *Dashboard) allowed(r *http.Request, page bool) bool {
	return d.access == nil || d.access.Allowed(r, page)
}

// ServePage serves the page (GET /ui), or 401 to a request that Access
// does not allow.
func (d *Dashboard) ServePage(w http.ResponseWriter, r *http.Request) {
	if !d.allowed(r, true) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, "sluice admin: the dashboard needs the admin token (admin.token).\n"+
			"Open /ui?token=TOKEN once in this browser tab, or send 'Authorization: Bearer TOKEN'.\n")
		return
	}
	page, err := uiPage()
	if err != nil {
		d.errorf(w, http.StatusInternalServerError, "dashboard: "+err.Error())
		return
	}
	var nb [16]byte
	_, _ = rand.Read(nb[:])
	nonce := base64.StdEncoding.EncodeToString(nb[:])
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+nonce+"'; style-src 'unsafe-inline'; "+
		"connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	if d.access != nil {
		d.access.Grant(w)
	}
	_, _ = io.WriteString(w, strings.ReplaceAll(page, "{{NONCE}}", nonce))
}

// viewers counts the open event streams of all dashboards.
var viewers atomic.Int64

// Viewers returns the number of event streams open in the process.
func Viewers() int64 { return viewers.Load() }

// parseSince reads a resume point "BOOT-SEQ": the samples after SEQ when
// BOOT is this process's, else 0 (everything kept).
func (h *history) parseSince(v string) uint64 {
	boot, seq, ok := strings.Cut(v, "-")
	if !ok || boot != h.boot {
		return 0
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// ServeEvents serves the event stream (GET /ui/events): the samples
// kept after the resume point (Last-Event-ID or ?since=), then each new
// one, until the client leaves or the history closes (Run returned). It
// answers 401 to a request that Access does not allow, 503 past
// MaxViewers.
func (d *Dashboard) ServeEvents(w http.ResponseWriter, r *http.Request) {
	if !d.allowed(r, false) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
		d.errorf(w, http.StatusUnauthorized, "the dashboard's event stream needs the admin token: open /ui?token=TOKEN, or send 'Authorization: Bearer TOKEN'")
		return
	}
	if v := viewers.Add(1); v > MaxViewers {
		viewers.Add(-1)
		d.errorf(w, http.StatusServiceUnavailable, fmt.Sprintf("too many dashboard viewers (at most %d)", MaxViewers))
		return
	}
	defer viewers.Add(-1)
	if r.Method == http.MethodHead {
		// The headers only: a stream that sends no body would never end.
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		return
	}
	hist := d.hist
	since := r.Header.Get("Last-Event-ID")
	if q := r.URL.Query().Get("since"); q != "" {
		since = q
	}
	seq := hist.parseSince(since)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var buf []byte
	buf = append(buf, "retry: 2000\n\n"...)
	// write sends buf; the backlog goes in pieces of about uiWriteChunk so
	// that a viewer's buffer stays small however long the history.
	write := func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(uiWriteTimeout))
		if _, err := w.Write(buf); err != nil {
			return false
		}
		buf = buf[:0]
		return true
	}
	for {
		out, first, wake, closed := hist.since(seq)
		for i, b := range out {
			buf = append(buf, "id: "...)
			buf = append(buf, hist.boot...)
			buf = append(buf, '-')
			buf = strconv.AppendUint(buf, first+uint64(i), 10)
			buf = append(buf, "\nevent: sample\ndata: "...)
			buf = append(buf, b...)
			buf = append(buf, "\n\n"...)
			if len(buf) >= uiWriteChunk && !write() {
				return
			}
		}
		if len(buf) > 0 || len(out) > 0 {
			if !write() {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
		seq = first + uint64(len(out)) - 1
		if closed {
			return
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return
		}
	}
}
