// SPDX-License-Identifier: Apache-2.0

package admin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/proxy/internal/dashboard"
)

// MaxBodyBytes bounds the body of an admin request, in bytes: a larger
// one gets 413 and changes nothing.
const MaxBodyBytes = 4096

// ErrNoStage is what Server.SetTarget returns for a stage the running
// configuration does not have (the API answers 404).
var ErrNoStage = errors.New("no such stage")

// Server is what the admin API reads and changes of a running proxy
// (package proxy provides it). Its methods are safe for concurrent use.
type Server interface {
	// Admin returns the admin section of the running configuration:
	// the same pointer for as long as that configuration runs, another
	// once a reload or a change applies a new one (the token and
	// admin.public in force are read from it).
	Admin() *Config
	// State returns the document of GET /state, with the last n
	// decisions per stage, for JSON encoding.
	State(n int) any
	// RunningConfig returns the running configuration, defaults filled
	// in, for YAML encoding (GET /config). Its secrets encode as
	// secret.Redacted.
	RunningConfig() any
	// Reload re-reads the configuration file and applies it; it returns
	// the configuration version running after.
	Reload() (version uint64, err error)
	// SetTarget sets the response-time target of the stage named name
	// and returns the old one, as stage.State shows it; ErrNoStage when
	// there is no such stage.
	SetTarget(name string, d time.Duration) (old string, err error)
	// SetShadow applies the running configuration with shadow set to on
	// (nothing when it already is) and returns the old value and the
	// configuration version running after.
	SetShadow(on bool) (old bool, version uint64, err error)
}

// Options are what the admin API serves besides the Server's state.
type Options struct {
	// Logger receives the changes made through the API and the refused
	// reloads (nil: slog.Default(), as in package proxy).
	Logger *slog.Logger
	// Gatherer is what GET /metrics serves (required), and MetricsLog
	// where that handler reports errors (nil: none).
	Gatherer   prometheus.Gatherer
	MetricsLog promhttp.Logger
	// Healthz and Readyz answer GET /healthz and GET /readyz, the
	// probes, open to anyone (required).
	Healthz, Readyz http.Handler
	// View is what the dashboard (/ui) shows (required).
	View dashboard.View
}

// API is the admin API: the route table, each route's guard, and the
// live dashboard, over a Server. It is safe for concurrent use.
type API struct {
	srv  Server
	opts Options
	log  *slog.Logger
	dash *dashboard.Dashboard
	// cur is the auth of the running configuration's admin section,
	// built once per generation (auth.go).
	cur atomic.Pointer[auth]
}

// New returns the admin API of srv.
func New(srv Server, opts Options) *API {
	api := &API{srv: srv, opts: opts, log: opts.Logger}
	if api.log == nil {
		api.log = slog.Default()
	}
	api.dash = dashboard.New(opts.View, dashboard.Options{Access: access{api}, Error: writeError, Logger: api.log})
	return api
}

// Dashboard returns the live dashboard behind /ui: its owner registers
// its metrics and runs its sampler.
func (api *API) Dashboard() *dashboard.Dashboard { return api.dash }

// Route is one entry of the admin API's route table: the table
// registers the router (Handler), writes the index page, and is what the
// tests walk, so that a new endpoint is guarded and tested without a
// list to keep in step.
type Route struct {
	// Methods the route answers (a GET route answers HEAD too).
	Methods []string
	// Path is the http.ServeMux path pattern: "/stages/{name}/target";
	// one ending in "/" is a subtree.
	Path string
	// Name is the endpoint's name, the one admin.public takes for a read
	// endpoint (PublicEndpoints).
	Name string
	// Auth says who may call it when a token is configured.
	Auth    Auth
	Handler http.Handler
	// Doc is the index page's line.
	Doc string
}

// Routes is the admin API's route table (/debug/pprof/ only with
// withPprof).
func (api *API) Routes(withPprof bool) []Route {
	get, put, post := []string{http.MethodGet}, []string{http.MethodPut}, []string{http.MethodPost}
	rs := []Route{
		{get, "/healthz", "healthz", AuthNone, api.opts.Healthz, "200 while the process is alive (no token)"},
		{get, "/readyz", "readyz", AuthNone, api.opts.Readyz, "200 when sluice can serve, else 503 and why (no token)"},
		{get, "/metrics", EndpointMetrics, AuthRead, promhttp.HandlerFor(api.opts.Gatherer, promhttp.HandlerOpts{ErrorLog: api.opts.MetricsLog}), "Prometheus metrics"},
		{get, "/state", EndpointState, AuthRead, http.HandlerFunc(api.handleState), "JSON: stages, classes, decisions, backends, queue [?decisions=N]"},
		{get, "/config", EndpointConfig, AuthRead, http.HandlerFunc(api.handleConfig), "the running configuration, secrets redacted [?format=json]"},
		{get, "/ui", EndpointUI, AuthUI, http.HandlerFunc(api.dash.ServePage), "live dashboard"},
		{get, "/ui/events", EndpointUI, AuthUI, http.HandlerFunc(api.dash.ServeEvents), "the dashboard's event stream"},
		{post, "/reload", "reload", AuthToken, http.HandlerFunc(api.handleReload), "re-read the configuration file"},
		{put, "/stages/{name}/target", "target", AuthToken, http.HandlerFunc(api.handleTarget), `{"target":"300ms"}`},
		{put, "/shadow", "shadow", AuthToken, http.HandlerFunc(api.handleShadow), `{"shadow":true}`},
	}
	if withPprof {
		rs = append(rs,
			Route{get, "/debug/pprof/", "pprof", AuthToken, http.HandlerFunc(pprof.Index), "Go's profiler (admin.pprof)"},
			Route{get, "/debug/pprof/cmdline", "pprof", AuthToken, http.HandlerFunc(pprof.Cmdline), ""},
			Route{get, "/debug/pprof/profile", "pprof", AuthToken, http.HandlerFunc(pprof.Profile), ""},
			Route{[]string{http.MethodGet, http.MethodPost}, "/debug/pprof/symbol", "pprof", AuthToken, http.HandlerFunc(pprof.Symbol), ""},
			Route{get, "/debug/pprof/trace", "pprof", AuthToken, http.HandlerFunc(pprof.Trace), ""})
	}
	index := Route{get, "/{$}", EndpointIndex, AuthRead, nil, "this list"}
	index.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { api.writeIndex(w, rs) })
	return append(rs, index)
}

// Handler serves the admin API: every route of Routes behind its guard.
// GET /ui and /ui/events are the dashboard (internal/dashboard).
func (api *API) Handler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range api.Routes(withPprof) {
		h := api.guard(rt)
		for _, m := range rt.Methods {
			mux.Handle(m+" "+rt.Path, h)
		}
	}
	return mux
}

// guard wraps a route: the caller must be allowed by the running
// configuration's token and admin.public (else 401, before anything of
// the request is read); a body over MaxBodyBytes gets 413; the body of
// a PUT or POST is read whole before the handler runs, so that no
// handler acts on a truncated body.
func (api *API) guard(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if rt.Auth != AuthNone && !api.auth().allows(r, rt.Auth, rt.Name) {
			unauthorized(w, denied(rt.Auth))
			return
		}
		tooLarge := func() {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", MaxBodyBytes))
		}
		if r.ContentLength > MaxBodyBytes {
			tooLarge()
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		if r.Method == http.MethodPut || r.Method == http.MethodPost {
			b, err := io.ReadAll(r.Body)
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				tooLarge()
				return
			case err != nil:
				writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rt.Handler.ServeHTTP(w, r)
	})
}

// writeIndex writes the index page: the route table.
func (api *API) writeIndex(w http.ResponseWriter, rs []Route) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var b strings.Builder
	b.WriteString("sluice admin\n\n")
	for _, rt := range rs {
		if rt.Doc == "" {
			continue
		}
		fmt.Fprintf(&b, "%-5s %-24s %s\n", strings.Join(rt.Methods, ","), strings.TrimSuffix(rt.Path, "{$}"), rt.Doc)
	}
	if a := api.auth(); a.enabled() {
		b.WriteString("\nEvery endpoint but /healthz and /readyz needs the admin token (Authorization: Bearer TOKEN)")
		if len(a.cfg.Public) > 0 {
			fmt.Fprintf(&b, ", except what admin.public opens: %s", strings.Join(a.cfg.Public, ", "))
		}
		b.WriteString(".\n")
	}
	_, _ = io.WriteString(w, b.String())
}
