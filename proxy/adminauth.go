package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"strings"
)

// MinAdminTokenLen is the shortest admin.token accepted, in bytes.
const MinAdminTokenLen = 16

// uiCookie is the dashboard's session cookie: it lets a browser that
// opened /ui with the token reload the page and read the event stream
// (EventSource cannot send headers). It holds HMAC-SHA256(token, a fixed
// label), not the token, and it is never accepted by a mutating endpoint,
// which needs the Authorization header, so a cross-site request that the
// browser sends with the cookie cannot change anything.
const uiCookie = "sluice_ui"

// redactedToken replaces admin.token in GET /config.
const redactedToken = "<redacted>"

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
	if tok == redactedToken {
		return errors.New("is the redacted placeholder that GET /config prints: put the real token in the file")
	}
	return nil
}

// readTokenFile sets Token from the first line of TokenFile.
func (a *AdminConfig) readTokenFile() error {
	if a.TokenFile == "" {
		return nil
	}
	if a.Token != "" {
		return fieldErr("admin.token_file", "is set with admin.token: give one of them")
	}
	b, err := os.ReadFile(a.TokenFile)
	if err != nil {
		return fieldErr("admin.token_file", "%q cannot be read: %v", a.TokenFile, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	a.Token = strings.TrimSpace(line)
	if a.Token == "" {
		return fieldErr("admin.token_file", "%q is empty: put the token on its first line", a.TokenFile)
	}
	if err := checkAdminToken(a.Token); err != nil {
		return fieldErr("admin.token_file", "the token in %q is invalid: %v", a.TokenFile, err)
	}
	return nil
}

// adminAuth checks the admin token of the running configuration. With no
// token configured (a loopback admin listener) every request passes.
type adminAuth struct {
	token  []byte // sha256 of the token, or nil
	cookie string // the session cookie's value
}

func newAdminAuth(token string) *adminAuth {
	if token == "" {
		return &adminAuth{}
	}
	sum := sha256.Sum256([]byte(token))
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("sluice admin ui session"))
	return &adminAuth{token: sum[:], cookie: hex.EncodeToString(mac.Sum(nil))}
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
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(a.cookie)) == 1
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

// unauthorized answers 401 with a Bearer challenge.
func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
	adminError(w, http.StatusUnauthorized, msg)
}

// requireBearer wraps a mutating or sensitive endpoint: with a token
// configured, the request needs "Authorization: Bearer TOKEN" (a cookie
// or a query parameter is not enough).
func (a *adminAuth) requireBearer(h http.Handler) http.Handler {
	if !a.enabled() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.bearer(r) {
			unauthorized(w, "this endpoint needs the admin token: send the header 'Authorization: Bearer TOKEN' (admin.token)")
			return
		}
		h.ServeHTTP(w, r)
	})
}
