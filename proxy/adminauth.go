// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// MinAdminTokenLen is the shortest admin.token accepted, in bytes.
const MinAdminTokenLen = 16

// uiCookie is the dashboard's session cookie: it lets a browser that
// opened /ui with the token reload the page and read the event stream
// (EventSource cannot send headers). It holds HMAC-SHA256(token, a fixed
// label), not the token, and it is accepted by /ui and /ui/events only:
// every other endpoint needs the Authorization header, so a cross-site
// request that the browser sends with the cookie can neither change nor
// read anything else. A rotated token changes it.
const uiCookie = "sluice_ui"

// The names of the admin API's endpoints that admin.public may open: the
// read endpoints. The route table (admin.go) names its routes with them.
const (
	endpointMetrics = "metrics"
	endpointState   = "state"
	endpointConfig  = "config"
	endpointUI      = "ui"
	endpointIndex   = "index"
)

// publicEndpoints are the names admin.public accepts, sorted.
var publicEndpoints = []string{endpointConfig, endpointIndex, endpointMetrics, endpointState, endpointUI}

// authClass is who may call an admin route when a token is configured.
type authClass uint8

const (
	// authNone: anyone (the probes /healthz and /readyz: kubelet sends no
	// token).
	authNone authClass = iota
	// authRead: the token, unless admin.public names the route.
	authRead
	// authUI: the dashboard: the token, its session cookie, ?token= on
	// the page itself, or admin.public naming "ui".
	authUI
	// authToken: the token in the Authorization header and nothing else
	// (every change, and /debug/pprof).
	authToken
)

func (c authClass) String() string {
	return [...]string{"open", "token unless public", "token or dashboard session", "token"}[c]
}

// checkAdminToken validates admin.token without echoing it.
func checkAdminToken(tok string) error {
	if tok == "" {
		return nil
	}
	if len(tok) < MinAdminTokenLen {
		return errors.New("too short: must be at least 16 characters (e.g. the output of 'openssl rand -hex 16')")
	}
	for _, c := range []byte(tok) {
		if c <= ' ' || c > '~' {
			return errors.New("must be printable ASCII without spaces (it is sent in an Authorization header)")
		}
	}
	return nil
}

// fixAdminBinding is how to fix an admin listener on a non-loopback
// address without a token, in the words of the error that refuses it.
const fixAdminBinding = "set admin.token_file to a file holding a random token " +
	"(in Kubernetes a Secret made from 'openssl rand -hex 32', mounted read-only), " +
	"or bind admin.addr to a loopback address such as 127.0.0.1:9901"

// validate checks the admin section's exposure, token and public list
// (admin.addr's form is checked with the listeners').
func (a *AdminConfig) validate() error {
	if !a.AllowPublic && !isLoopbackAddr(a.Addr) {
		return fieldErr("admin.addr", "%q is not a loopback address: the admin API can reload and retarget the proxy; "+
			"bind it to a loopback address such as 127.0.0.1:9901, or set admin.allow_public: true together with "+
			"admin.token_file naming a file that holds a random token (a mounted Kubernetes Secret), or with "+
			"admin.tls requiring client certificates (client_ca, client_auth: require)", a.Addr)
	}
	if err := checkAdminToken(a.Token.Reveal()); err != nil {
		if a.TokenFile != "" {
			return fieldErr("admin.token_file", "the token in %q is invalid: %v", a.TokenFile, err)
		}
		return fieldErr("admin.token", "%v", err)
	}
	if a.TLS != nil {
		if err := a.TLS.Validate("admin.tls"); err != nil {
			return err
		}
	}
	// A verified client certificate (admin.tls.client_auth: require)
	// authenticates every admin request as a token does.
	if !a.Token.IsSet() && !isLoopbackAddr(a.Addr) && !a.TLS.RequiresClientCert() {
		return fieldErr("admin.token", "required when admin.addr (%q) is not a loopback address: "+
			"every admin endpoint but /healthz and /readyz needs it there; %s", a.Addr, fixAdminBinding)
	}
	for i, name := range a.Public {
		p := "admin.public[" + strconv.Itoa(i) + "]"
		switch {
		case slices.Contains(publicEndpoints, name):
			if slices.Index(a.Public, name) < i {
				return fieldErr(p, "%q is listed twice", name)
			}
		case name == "reload" || name == "target" || name == "shadow":
			return fieldErr(p, "%q changes the proxy and always needs the token: only read endpoints can be public (%s)",
				name, strings.Join(publicEndpoints, ", "))
		case name == "pprof":
			return fieldErr(p, "%q always needs the token (a profile costs CPU, and the command line may hold secrets): "+
				"only %s can be public", name, strings.Join(publicEndpoints, ", "))
		default:
			return fieldErr(p, "%q is not an endpoint name: must be one of %s", name, strings.Join(publicEndpoints, ", "))
		}
	}
	return nil
}

// adminAuth checks the admin token of one configuration generation. With
// no token configured (a loopback admin listener) every request passes.
type adminAuth struct {
	cfg    *Config         // the configuration it was built from
	token  []byte          // sha256 of the token, or nil
	cookie string          // the session cookie's value
	public map[string]bool // admin.public
}

func newAdminAuth(cfg *Config) *adminAuth {
	a := &adminAuth{cfg: cfg, public: map[string]bool{}}
	for _, n := range cfg.Admin.Public {
		a.public[n] = true
	}
	tok := cfg.Admin.Token.Reveal()
	if tok == "" {
		return a
	}
	sum := sha256.Sum256([]byte(tok))
	mac := hmac.New(sha256.New, []byte(tok))
	mac.Write([]byte("sluice admin ui session"))
	a.token, a.cookie = sum[:], hex.EncodeToString(mac.Sum(nil))
	return a
}

// adminAuth returns the admin auth of the running configuration: a
// reload that rotates the token, or changes admin.public, applies to
// every request that starts after it, atomically with the rest of the
// configuration. It is built once per configuration generation.
func (s *Server) adminAuth() *adminAuth {
	cfg := s.h.gen.Load().cfg
	if a := s.auth.Load(); a != nil && a.cfg == cfg {
		return a
	}
	a := newAdminAuth(cfg)
	s.auth.Store(a)
	return a
}

// enabled reports whether a token is configured.
func (a *adminAuth) enabled() bool { return a.token != nil }

// bearer reports whether r carries the token in "Authorization: Bearer".
// The comparison is of SHA-256 digests in constant time, so that neither
// the token's bytes nor its length leak through timing.
func (a *adminAuth) bearer(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) < len(p) || !strings.EqualFold(h[:len(p)], p) {
		return false
	}
	return a.match(strings.TrimSpace(h[len(p):]))
}

func (a *adminAuth) match(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], a.token) == 1
}

// session reports whether r carries the dashboard's session cookie.
func (a *adminAuth) session(r *http.Request) bool {
	c, err := r.Cookie(uiCookie)
	return err == nil && a.cookie != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(a.cookie)) == 1
}

// setSession gives the browser the dashboard's session cookie (for the
// path /ui, HttpOnly, SameSite=Strict, until the browser closes).
func (a *adminAuth) setSession(w http.ResponseWriter) {
	if !a.enabled() {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: uiCookie, Value: a.cookie, Path: "/ui", HttpOnly: true,
		SameSite: http.SameSiteStrictMode})
}

// ui reports whether r may see the dashboard: page is true for the page
// itself, which may carry the token in its query (?token=) once.
func (a *adminAuth) ui(r *http.Request, page bool) bool {
	if !a.enabled() || a.public[endpointUI] || a.bearer(r) || a.session(r) {
		return true
	}
	q := r.URL.Query()
	return page && q.Has("token") && a.match(q.Get("token"))
}

// allows reports whether r may call a route of class c named name.
func (a *adminAuth) allows(r *http.Request, c authClass, name string) bool {
	if !a.enabled() {
		return true
	}
	switch c {
	case authNone:
		return true
	case authRead:
		return a.public[name] || a.bearer(r)
	case authUI:
		return a.ui(r, r.URL.Path == "/ui")
	default:
		return a.bearer(r)
	}
}

// unauthorized answers 401 with a Bearer challenge.
func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
	adminError(w, http.StatusUnauthorized, msg)
}

// denied is the 401 message of a route of class c.
func denied(c authClass) string {
	if c == authUI {
		return "the dashboard needs the admin token: open /ui?token=TOKEN once in this browser tab, or send 'Authorization: Bearer TOKEN'"
	}
	return "this endpoint needs the admin token: send the header 'Authorization: Bearer TOKEN' (admin.token)"
}
