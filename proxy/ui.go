package proxy

import (
	"crypto/rand"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The live dashboard on the admin listener:
//
//	GET /ui         one self-contained page (uPlot and the page's script
//	                inlined; it loads nothing else)
//	GET /ui/events  Server-Sent Events: the kept history, then one
//	                sample a second (event "sample", id BOOT-SEQ; resume
//	                with Last-Event-ID or ?since=BOOT-SEQ)
//	PUT /shadow     body {"shadow":true}: turn shadow mode on or off
//
// With admin.token set, /ui needs the token once — as
// "Authorization: Bearer TOKEN" or as ?token=TOKEN, which the page then
// removes from the address bar and keeps in the tab's sessionStorage —
// and answers with an HttpOnly, SameSite=Strict session cookie for /ui
// that the page's reloads and the event stream use. Changes (PUT, POST)
// need the Authorization header itself; the page sends it.

//go:embed ui/index.html ui/vendor/uplot/uPlot.iife.min.js ui/vendor/uplot/uPlot.min.css ui/vendor/uplot/LICENSE
var uiFiles embed.FS

// MaxUIViewers bounds the event streams open at once; more get 503.
const MaxUIViewers = 64

// uiWriteTimeout bounds one write to a viewer: a viewer that does not
// read for that long is dropped (its browser reconnects).
const uiWriteTimeout = 10 * time.Second

// uiWriteChunk is about the most of the backlog an event stream buffers
// before writing it, in bytes.
const uiWriteChunk = 64 << 10

var uiPage = sync.OnceValues(func() (string, error) {
	read := func(name string) (string, error) {
		b, err := uiFiles.ReadFile(name)
		return string(b), err
	}
	page, err := read("ui/index.html")
	if err != nil {
		return "", err
	}
	js, err := read("ui/vendor/uplot/uPlot.iife.min.js")
	if err != nil {
		return "", err
	}
	css, err := read("ui/vendor/uplot/uPlot.min.css")
	if err != nil {
		return "", err
	}
	lic, err := read("ui/vendor/uplot/LICENSE")
	if err != nil {
		return "", err
	}
	if strings.Contains(strings.ToLower(js), "</script") || strings.Contains(strings.ToLower(css), "</style") {
		return "", fmt.Errorf("the vendored uPlot cannot be inlined: it contains a closing tag")
	}
	lic = strings.ReplaceAll(lic, "*/", "* /")
	page = strings.Replace(page, "/*UPLOT_CSS*/", css, 1)
	page = strings.Replace(page, "/*UPLOT_JS*/", "/*! uPlot 1.6.32\n"+lic+"*/\n"+js, 1)
	return page, nil
})

// registerUI adds the dashboard's routes and PUT /shadow to mux.
func (s *Server) registerUI(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui", s.handleUI)
	mux.HandleFunc("GET /ui/events", s.handleUIEvents)
	mux.Handle("PUT /shadow", s.auth.requireBearer(http.HandlerFunc(s.handleShadow)))
}

// uiAuthorized reports whether r may see the dashboard: no token is
// configured, or r carries it (header, session cookie, or for the page
// itself ?token=).
func (s *Server) uiAuthorized(r *http.Request, query bool) bool {
	a := s.auth
	if !a.enabled() || a.bearer(r) || a.session(r) {
		return true
	}
	return query && r.URL.Query().Has("token") && a.match(r.URL.Query().Get("token"))
}

func (s *Server) handleUI(w http.ResponseWriter, r *http.Request) {
	if !s.uiAuthorized(r, true) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, "sluice admin: the dashboard needs the admin token (admin.token).\n"+
			"Open /ui?token=TOKEN once in this browser tab, or send 'Authorization: Bearer TOKEN'.\n")
		return
	}
	page, err := uiPage()
	if err != nil {
		adminError(w, http.StatusInternalServerError, "dashboard: "+err.Error())
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
	s.auth.setSession(w)
	_, _ = io.WriteString(w, strings.ReplaceAll(page, "{{NONCE}}", nonce))
}

// uiViewers counts the open event streams of all servers.
var uiViewers atomic.Int64

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

func (s *Server) handleUIEvents(w http.ResponseWriter, r *http.Request) {
	if !s.uiAuthorized(r, false) {
		unauthorized(w, "the dashboard's event stream needs the admin token: open /ui?token=TOKEN, or send 'Authorization: Bearer TOKEN'")
		return
	}
	if v := uiViewers.Add(1); v > MaxUIViewers {
		uiViewers.Add(-1)
		adminError(w, http.StatusServiceUnavailable, fmt.Sprintf("too many dashboard viewers (at most %d)", MaxUIViewers))
		return
	}
	defer uiViewers.Add(-1)
	hist := s.hist
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

// handleShadow is PUT /shadow: body {"shadow":true|false}. It applies the
// running configuration with shadow changed — a new configuration
// version, and, as with a reload that changes shadow, every stage starts
// afresh (targets set through the API go back to the configured ones). A
// reload from the file brings back the file's shadow setting.
func (s *Server) handleShadow(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Shadow *bool `json:"shadow"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		adminError(w, http.StatusBadRequest, `body must be JSON like {"shadow":true}: `+err.Error())
		return
	}
	if body.Shadow == nil {
		adminError(w, http.StatusBadRequest, `shadow is required: {"shadow":true} or {"shadow":false}`)
		return
	}
	old, version, err := s.setShadow(*body.Shadow)
	if err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	if old != *body.Shadow {
		s.log.Info("shadow mode changed", "old", old, "new", *body.Shadow, "config_version", version, "from", r.RemoteAddr)
	}
	writeJSON(w, http.StatusOK, map[string]any{"shadow": *body.Shadow, "old": old, "config_version": version})
}

// setShadow applies the running configuration with Shadow = on (nothing
// when it already is) and returns the old value and the running
// configuration version.
func (s *Server) setShadow(on bool) (old bool, version uint64, err error) {
	err = s.applyFrom(func(cur *Config) *Config {
		old = cur.Shadow
		if old == on {
			return nil
		}
		c := *cur // configurations are never modified once running: a shallow copy is enough
		c.Shadow = on
		return &c
	})
	return old, s.h.gen.Load().version, err
}
