// SPDX-License-Identifier: Apache-2.0

package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/proxy/internal/dashboard"
)

// SessionCookie is the dashboard's session cookie: it lets a browser
// that opened /ui with the token reload the page and read the event
// stream (EventSource cannot send headers). It holds HMAC-SHA256(token, a
// fixed label), not the token, and it is accepted by /ui and /ui/events
// only: every other endpoint needs the Authorization header, so a
// cross-site request that the browser sends with the cookie can neither
// change nor read anything else. A rotated token changes it.
const SessionCookie = "sluice_ui"

// Auth is who may call an admin route when a token is configured.
type Auth uint8

const (
	// AuthNone: anyone (the probes /healthz and /readyz: kubelet sends no
	// token).
	AuthNone Auth = iota
	// AuthRead: the token, unless admin.public names the route.
	AuthRead
	// AuthUI: the dashboard: the token, its session cookie, ?token= on
	// the page itself, or admin.public naming "ui".
	AuthUI
	// AuthToken: the token in the Authorization header and nothing else
	// (every change, and /debug/pprof).
	AuthToken
)

func (c Auth) String() string {
	return [...]string{"open", "token unless public", "token or dashboard session", "token"}[c]
}

// auth checks the admin token of one configuration generation. With no
// token configured (a loopback admin listener) every request passes.
type auth struct {
	cfg    *Config         // the admin section it was built from
	token  []byte          // sha256 of the token, or nil
	cookie string          // the session cookie's value
	public map[string]bool // admin.public
}

func newAuth(cfg *Config) *auth {
	a := &auth{cfg: cfg, public: map[string]bool{}}
	for _, n := range cfg.Public {
		a.public[n] = true
	}
	tok := cfg.Token.Reveal()
	if tok == "" {
		return a
	}
	sum := sha256.Sum256([]byte(tok))
	mac := hmac.New(sha256.New, []byte(tok))
	mac.Write([]byte("sluice admin ui session"))
	a.token, a.cookie = sum[:], hex.EncodeToString(mac.Sum(nil))
	return a
}

// auth returns the admin auth of the running configuration: a reload
// that rotates the token, or changes admin.public, applies to every
// request that starts after it, atomically with the rest of the
// configuration. It is built once per configuration generation.
func (api *API) auth() *auth {
	cfg := api.srv.Admin()
	if a := api.cur.Load(); a != nil && a.cfg == cfg {
		return a
	}
	a := newAuth(cfg)
	api.cur.Store(a)
	return a
}

// enabled reports whether a token is configured.
func (a *auth) enabled() bool { return a.token != nil }

// bearer reports whether r carries the token in "Authorization: Bearer".
// The comparison is of SHA-256 digests in constant time, so that neither
// the token's bytes nor its length leak through timing.
func (a *auth) bearer(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) < len(p) || !strings.EqualFold(h[:len(p)], p) {
		return false
	}
	return a.match(strings.TrimSpace(h[len(p):]))
}

func (a *auth) match(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], a.token) == 1
}

// session reports whether r carries the dashboard's session cookie.
func (a *auth) session(r *http.Request) bool {
	c, err := r.Cookie(SessionCookie)
	return err == nil && a.cookie != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(a.cookie)) == 1
}

// setSession gives the browser the dashboard's session cookie (for the
// path /ui, HttpOnly, SameSite=Strict, until the browser closes).
func (a *auth) setSession(w http.ResponseWriter) {
	if !a.enabled() {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: a.cookie, Path: "/ui", HttpOnly: true,
		SameSite: http.SameSiteStrictMode})
}

// ui reports whether r may see the dashboard: page is true for the page
// itself, which may carry the token in its query (?token=) once.
func (a *auth) ui(r *http.Request, page bool) bool {
	if !a.enabled() || a.public[EndpointUI] || a.bearer(r) || a.session(r) {
		return true
	}
	q := r.URL.Query()
	return page && q.Has("token") && a.match(q.Get("token"))
}

// allows reports whether r may call a route of class c named name.
func (a *auth) allows(r *http.Request, c Auth, name string) bool {
	if !a.enabled() {
		return true
	}
	switch c {
	case AuthNone:
		return true
	case AuthRead:
		return a.public[name] || a.bearer(r)
	case AuthUI:
		return a.ui(r, r.URL.Path == "/ui")
	default:
		return a.bearer(r)
	}
}

// unauthorized answers 401 with a Bearer challenge.
func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
	writeError(w, http.StatusUnauthorized, msg)
}

// denied is the 401 message of a route of class c.
func denied(c Auth) string {
	if c == AuthUI {
		return "the dashboard needs the admin token: open /ui?token=TOKEN once in this browser tab, or send 'Authorization: Bearer TOKEN'"
	}
	return "this endpoint needs the admin token: send the header 'Authorization: Bearer TOKEN' (admin.token)"
}

// access guards the dashboard with the running configuration's admin
// token (dashboard.Access): without a token configured, or with "ui" in
// admin.public, everyone may see it; with one, a request that carries it
// (Authorization header, the session cookie, or for the page itself
// ?token=). The admin router's guard asks the same question first
// (auth.ui).
type access struct{ api *API }

var _ dashboard.Access = access{}

func (d access) Allowed(r *http.Request, page bool) bool { return d.api.auth().ui(r, page) }

func (d access) Grant(w http.ResponseWriter) { d.api.auth().setSession(w) }
