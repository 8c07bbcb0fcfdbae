// SPDX-License-Identifier: Apache-2.0

package admin

import (
	"cmp"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/fielderr"
	"github.com/sluicehq/sluice/internal/secret"
	"github.com/sluicehq/sluice/proxy/tlsconf"
)

// DefaultAddr is the admin listener's default address.
const DefaultAddr = "127.0.0.1:9901"

// MinTokenLen is the shortest admin.token accepted, in bytes.
const MinTokenLen = 16

// Config is the admin listener (the proxy's AdminConfig): /metrics,
// /state, /config, /reload, /stages/{name}/target, /shadow, the
// dashboard /ui and optionally /debug/pprof (API.Routes is the route
// table).
type Config struct {
	// Addr is host:port (default 127.0.0.1:9901). A non-loopback address
	// is refused unless AllowPublic is true and Token is set. Changing it
	// needs a restart.
	Addr string `yaml:"addr"`
	// AllowPublic permits a non-loopback admin address (default false).
	// The admin API can change targets and reload the configuration:
	// there it needs Token too.
	AllowPublic bool `yaml:"allow_public"`
	// Token is a bearer token (at least 16 printable ASCII characters
	// without spaces), a secret: shown as <redacted> everywhere. When
	// set, every endpoint but GET /healthz and GET /readyz needs it
	// (Authorization: Bearer TOKEN), except the read endpoints listed in
	// Public; the dashboard's session cookie lets a browser that opened
	// /ui with it back into /ui and /ui/events. Required when Addr is not
	// loopback; optional (default none) on loopback. A reload applies a
	// changed token at once.
	Token secret.String `yaml:"token,omitempty"`
	// TokenFile names a file whose first line is the token, read at start
	// and on every reload (a mounted Kubernetes Secret keeps the token
	// out of a ConfigMap, and rotates without a restart); exclusive with
	// Token (default none).
	TokenFile string `yaml:"token_file,omitempty"`
	// Public names read endpoints that answer without the token when one
	// is set (default none): "metrics" (GET /metrics, for a Prometheus
	// scrape without credentials), "state" (GET /state), "config" (GET
	// /config, secrets still redacted), "ui" (the dashboard /ui and
	// /ui/events; its changes still need the token) and "index" (GET /).
	// Changes (PUT, POST) and /debug/pprof always need the token. A
	// reload applies changes.
	Public []string `yaml:"public,omitempty"`
	// Pprof serves net/http/pprof under /debug/pprof/ (default false).
	// Changing it needs a restart.
	Pprof bool `yaml:"pprof"`
	// TLS, when set, serves the admin API over HTTPS, as a listener's
	// tls does (TLSConfig). With client_auth require, a verified client
	// certificate is enough to serve a non-loopback Addr without Token
	// (AllowPublic is still needed). Default none: plaintext.
	TLS *tlsconf.Config `yaml:"tls,omitempty"`
}

// The names of the admin API's endpoints that admin.public may open: the
// read endpoints. The route table (API.Routes) names its routes with
// them.
const (
	EndpointMetrics = "metrics"
	EndpointState   = "state"
	EndpointConfig  = "config"
	EndpointUI      = "ui"
	EndpointIndex   = "index"
)

// publicEndpoints are the names admin.public accepts, sorted.
var publicEndpoints = []string{EndpointConfig, EndpointIndex, EndpointMetrics, EndpointState, EndpointUI}

// PublicEndpoints returns the names admin.public accepts, sorted.
func PublicEndpoints() []string { return slices.Clone(publicEndpoints) }

// SetDefaults fills the documented defaults of a's unset fields, its
// tls section's included.
func (a *Config) SetDefaults() {
	a.TLS.SetDefaults()
	a.Addr = cmp.Or(a.Addr, DefaultAddr)
}

// checkToken validates admin.token without echoing it.
func checkToken(tok string) error {
	if tok == "" {
		return nil
	}
	if len(tok) < MinTokenLen {
		return errors.New("too short: must be at least 16 characters (e.g. the output of 'openssl rand -hex 16')")
	}
	for _, c := range []byte(tok) {
		if c <= ' ' || c > '~' {
			return errors.New("must be printable ASCII without spaces (it is sent in an Authorization header)")
		}
	}
	return nil
}

// fixBinding is how to fix an admin listener on a non-loopback address
// without a token, in the words of the error that refuses it.
const fixBinding = "set admin.token_file to a file holding a random token " +
	"(in Kubernetes a Secret made from 'openssl rand -hex 32', mounted read-only), " +
	"or bind admin.addr to a loopback address such as 127.0.0.1:9901"

// Validate checks the admin section's exposure, token, tls and public
// list, reporting the first invalid field as a *sluice.FieldError
// ("admin.token"). admin.addr's form, and that no listener takes it, is
// the proxy's to check. Call SetDefaults first.
func (a *Config) Validate() error {
	if !a.AllowPublic && !IsLoopbackAddr(a.Addr) {
		return fieldErr("admin.addr", "%q is not a loopback address: the admin API can reload and retarget the proxy; "+
			"bind it to a loopback address such as 127.0.0.1:9901, or set admin.allow_public: true together with "+
			"admin.token_file naming a file that holds a random token (a mounted Kubernetes Secret), or with "+
			"admin.tls requiring client certificates (client_ca, client_auth: require)", a.Addr)
	}
	if err := checkToken(a.Token.Reveal()); err != nil {
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
	if !a.Token.IsSet() && !IsLoopbackAddr(a.Addr) && !a.TLS.RequiresClientCert() {
		return fieldErr("admin.token", "required when admin.addr (%q) is not a loopback address: "+
			"every admin endpoint but /healthz and /readyz needs it there; %s", a.Addr, fixBinding)
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

// IsLoopbackAddr reports whether host:port names only loopback
// interfaces ("localhost", 127.0.0.0/8, ::1).
func IsLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func fieldErr(path, format string, args ...any) error {
	return fielderr.Errorf(path, format, args...)
}
