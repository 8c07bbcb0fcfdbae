// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/cluster"
	"github.com/sluicehq/sluice/internal/secret"
	"github.com/sluicehq/sluice/proxy/buffer"
	"github.com/sluicehq/sluice/share"
	"github.com/sluicehq/sluice/stage"
)

// DefaultStateDecisions is how many recent decisions per stage GET /state
// shows unless ?decisions=N says otherwise (at most MaxStateDecisions).
const DefaultStateDecisions = 10

// MaxStateDecisions is the most decisions per stage GET /state shows.
const MaxStateDecisions = 1000

// MaxAdminBodyBytes bounds the body of an admin request, in bytes: a
// larger one gets 413 and changes nothing.
const MaxAdminBodyBytes = 4096

// adminRoute is one entry of the admin API's route table: the table
// registers the router (adminHandler), writes the index page, and is
// what the tests walk, so that a new endpoint is guarded and tested
// without a list to keep in step.
type adminRoute struct {
	// methods the route answers (a GET route answers HEAD too).
	methods []string
	// path is the http.ServeMux path pattern: "/stages/{name}/target";
	// one ending in "/" is a subtree.
	path string
	// name is the endpoint's name, the one admin.public takes for a read
	// endpoint (publicEndpoints).
	name string
	// auth says who may call it when a token is configured.
	auth    authClass
	handler http.Handler
	// doc is the index page's line.
	doc string
}

// adminRoutes is the admin API's route table (/debug/pprof/ only with
// withPprof).
func (s *Server) adminRoutes(withPprof bool) []adminRoute {
	get, put, post := []string{http.MethodGet}, []string{http.MethodPut}, []string{http.MethodPost}
	rs := []adminRoute{
		{get, "/healthz", "healthz", authNone, http.HandlerFunc(serveHealthz), "200 while the process is alive (no token)"},
		{get, "/readyz", "readyz", authNone, http.HandlerFunc(s.ready.serve), "200 when sluice can serve, else 503 and why (no token)"},
		{get, "/metrics", endpointMetrics, authRead, promhttp.HandlerFor(s.gath, promhttp.HandlerOpts{ErrorLog: serverLog(s.log)}), "Prometheus metrics"},
		{get, "/state", endpointState, authRead, http.HandlerFunc(s.handleState), "JSON: stages, classes, decisions, backends, queue [?decisions=N]"},
		{get, "/config", endpointConfig, authRead, http.HandlerFunc(s.handleConfig), "the running configuration, secrets redacted [?format=json]"},
		{get, "/ui", endpointUI, authUI, http.HandlerFunc(s.dash.ServePage), "live dashboard"},
		{get, "/ui/events", endpointUI, authUI, http.HandlerFunc(s.dash.ServeEvents), "the dashboard's event stream"},
		{post, "/reload", "reload", authToken, http.HandlerFunc(s.handleReload), "re-read the configuration file"},
		{put, "/stages/{name}/target", "target", authToken, http.HandlerFunc(s.handleTarget), `{"target":"300ms"}`},
		{put, "/shadow", "shadow", authToken, http.HandlerFunc(s.handleShadow), `{"shadow":true}`},
	}
	if withPprof {
		rs = append(rs,
			adminRoute{get, "/debug/pprof/", "pprof", authToken, http.HandlerFunc(pprof.Index), "Go's profiler (admin.pprof)"},
			adminRoute{get, "/debug/pprof/cmdline", "pprof", authToken, http.HandlerFunc(pprof.Cmdline), ""},
			adminRoute{get, "/debug/pprof/profile", "pprof", authToken, http.HandlerFunc(pprof.Profile), ""},
			adminRoute{[]string{http.MethodGet, http.MethodPost}, "/debug/pprof/symbol", "pprof", authToken, http.HandlerFunc(pprof.Symbol), ""},
			adminRoute{get, "/debug/pprof/trace", "pprof", authToken, http.HandlerFunc(pprof.Trace), ""})
	}
	index := adminRoute{get, "/{$}", endpointIndex, authRead, nil, "this list"}
	index.handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { s.writeIndex(w, rs) })
	return append(rs, index)
}

// adminHandler serves the admin API: every route of adminRoutes behind
// its guard. GET /ui and /ui/events are the dashboard
// (internal/dashboard); /readyz is health.go's.
func (s *Server) adminHandler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.adminRoutes(withPprof) {
		h := s.guard(rt)
		for _, m := range rt.methods {
			mux.Handle(m+" "+rt.path, h)
		}
	}
	return mux
}

// guard wraps a route: the caller must be allowed by the running
// configuration's token and admin.public (else 401, before anything of
// the request is read); a body over MaxAdminBodyBytes gets 413; the body
// of a PUT or POST is read whole before the handler runs, so that no
// handler acts on a truncated body.
func (s *Server) guard(rt adminRoute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if rt.auth != authNone && !s.adminAuth().allows(r, rt.auth, rt.name) {
			unauthorized(w, denied(rt.auth))
			return
		}
		tooLarge := func() {
			adminError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", MaxAdminBodyBytes))
		}
		if r.ContentLength > MaxAdminBodyBytes {
			tooLarge()
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxAdminBodyBytes)
		if r.Method == http.MethodPut || r.Method == http.MethodPost {
			b, err := io.ReadAll(r.Body)
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				tooLarge()
				return
			case err != nil:
				adminError(w, http.StatusBadRequest, "reading the body: "+err.Error())
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		rt.handler.ServeHTTP(w, r)
	})
}

// writeIndex writes the index page: the route table.
func (s *Server) writeIndex(w http.ResponseWriter, rs []adminRoute) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var b strings.Builder
	b.WriteString("sluice admin\n\n")
	for _, rt := range rs {
		if rt.doc == "" {
			continue
		}
		fmt.Fprintf(&b, "%-5s %-24s %s\n", strings.Join(rt.methods, ","), strings.TrimSuffix(rt.path, "{$}"), rt.doc)
	}
	if a := s.adminAuth(); a.enabled() {
		b.WriteString("\nEvery endpoint but /healthz and /readyz needs the admin token (Authorization: Bearer TOKEN)")
		if len(a.cfg.Admin.Public) > 0 {
			fmt.Fprintf(&b, ", except what admin.public opens: %s", strings.Join(a.cfg.Admin.Public, ", "))
		}
		b.WriteString(".\n")
	}
	_, _ = io.WriteString(w, b.String())
}

// StateDoc is the JSON document of GET /state.
type StateDoc struct {
	ConfigVersion uint64        `json:"config_version"`
	LoadedAt      time.Time     `json:"loaded_at"`
	ConfigFile    string        `json:"config_file,omitempty"`
	Shadow        bool          `json:"shadow"`
	InFlight      int64         `json:"requests_in_flight"`
	Streams       int64         `json:"streams_in_flight"`
	Stages        []stage.State `json:"stages"`
	Backends      PoolState     `json:"backends"`
	// Policer is the connection policer (absent without one).
	Policer *PolicerState `json:"policer,omitempty"`
	// Resources are the resource rules, Sensors every sensor.
	Resources []ResourceState `json:"resources,omitempty"`
	Sensors   []SensorState   `json:"sensors,omitempty"`
	// Shares are the client bandwidth shares (absent without them).
	Shares *share.Snapshot `json:"shares,omitempty"`
	// Cluster is the cluster as this instance sees it (absent without a
	// cluster section): mode, live instances, each global budget and
	// client allocation with this instance's part and the demand.
	Cluster *cluster.View `json:"cluster,omitempty"`
	// ResponseBuffering is the response buffers' memory and disk in use
	// against their caps, and the open temporary files.
	ResponseBuffering buffer.State `json:"response_buffering"`
}

// State returns the proxy's state with the last n decisions per stage,
// rule and policer.
func (s *Server) State(n int) StateDoc {
	g := s.h.gen.Load()
	doc := StateDoc{ConfigVersion: g.version, LoadedAt: g.loaded, ConfigFile: s.file, Shadow: g.cfg.Shadow,
		InFlight: s.h.active.Load(), Streams: s.h.streams.Load(), Stages: g.pol.State(n), Backends: g.pool.State(),
		Resources: s.ov.resourceStates(g, n), ResponseBuffering: s.h.buf.State(&g.buf)}
	sanitizeStages(doc.Stages)
	if s.ov.pol != nil {
		ps := s.ov.pol.state(n, s.ov.registry)
		doc.Policer = &ps
	}
	for _, sn := range s.ov.sensors {
		doc.Sensors = append(doc.Sensors, sn.state())
	}
	if g.shares != nil {
		snap := g.shares.Snapshot()
		doc.Shares = &snap
	}
	if g.cluster != nil {
		v := g.cluster.View()
		doc.Cluster = &v
	}
	return doc
}

func (s *Server) handleState(w http.ResponseWriter, r *http.Request) {
	n, err := parseDecisions(r.URL.Query().Get("decisions"))
	if err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.State(n))
}

// parseDecisions reads GET /state's ?decisions=N: "" is
// DefaultStateDecisions, else an integer in [0, MaxStateDecisions].
func parseDecisions(v string) (int, error) {
	if v == "" {
		return DefaultStateDecisions, nil
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 0 || k > MaxStateDecisions {
		return 0, fmt.Errorf("decisions=%q is invalid: must be an integer in [0, %d]", clip(v), MaxStateDecisions)
	}
	return k, nil
}

// clip shortens a value quoted back in an error to 64 bytes.
func clip(v string) string {
	if len(v) > 64 {
		return v[:64] + "…"
	}
	return v
}

// handleConfig is GET /config: the running configuration, defaults
// filled in, as YAML (JSON with ?format=json or Accept: application/json).
// Every secret shows as <redacted>, and one read from its file form is
// left out, so that the file form alone shows (token_file, not token):
// the output is then itself a valid configuration.
func (s *Server) handleConfig(w http.ResponseWriter, r *http.Request) {
	var doc yaml.Node
	if err := doc.Encode(s.h.gen.Load().cfg); err != nil {
		adminError(w, http.StatusInternalServerError, "encoding the configuration: "+err.Error())
		return
	}
	dropResolvedSecrets(&doc)
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		var v any
		if err := doc.Decode(&v); err != nil {
			adminError(w, http.StatusInternalServerError, "encoding the configuration: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, v)
		return
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		adminError(w, http.StatusInternalServerError, "encoding the configuration: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	_, _ = w.Write(out)
}

// dropResolvedSecrets removes from every mapping of n a key X whose
// sibling X_file is set and whose value shows only secret.Redacted (a
// secret read from its file).
func dropResolvedSecrets(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		files := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k, v := n.Content[i].Value, n.Content[i+1]; strings.HasSuffix(k, secret.FileSuffix) && v.Kind == yaml.ScalarNode && v.Value != "" {
				files[strings.TrimSuffix(k, secret.FileSuffix)] = true
			}
		}
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			if files[n.Content[i].Value] && onlyRedacted(n.Content[i+1]) {
				continue
			}
			kept = append(kept, n.Content[i], n.Content[i+1])
		}
		n.Content = kept
	}
	for _, c := range n.Content {
		dropResolvedSecrets(c)
	}
}

// onlyRedacted reports whether every scalar value under n is
// secret.Redacted.
func onlyRedacted(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value == secret.Redacted
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			if !onlyRedacted(n.Content[i]) {
				return false
			}
		}
		return len(n.Content) > 0
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if !onlyRedacted(c) {
				return false
			}
		}
		return len(n.Content) > 0
	}
	return false
}

func (s *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	if err := s.Reload(); err != nil {
		s.log.Warn("reload refused; the running configuration stays", "err", err, "from", r.RemoteAddr)
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "reloaded", "config_version": s.h.gen.Load().version})
}

func (s *Server) handleTarget(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	d, err := parseTargetBody(readAll(r))
	if err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	st := s.h.gen.Load().pol.Stage(name)
	if st == nil {
		adminError(w, http.StatusNotFound, fmt.Sprintf("no stage %q", clip(name)))
		return
	}
	old := st.State(0).Target
	if err := st.SetTarget(d); err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.m.targetChanges.WithLabelValues(name).Inc()
	s.log.Info("stage target changed", "stage", name, "old", old, "new", d.String(), "from", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]string{"stage": name, "old": old, "target": d.String()})
}

// readAll returns the body the guard read (at most MaxAdminBodyBytes).
func readAll(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

// decodeBody decodes b, an admin request's body, into v strictly: one
// JSON object of known fields, and nothing after it.
func decodeBody(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

// parseTargetBody reads the body of PUT /stages/{name}/target,
// {"target":"300ms"}: a positive duration.
func parseTargetBody(b []byte) (time.Duration, error) {
	var body struct {
		Target *string `json:"target"`
	}
	if err := decodeBody(b, &body); err != nil {
		return 0, fmt.Errorf(`body must be JSON like {"target":"300ms"}: %v`, err)
	}
	if body.Target == nil {
		return 0, errors.New(`target is required: {"target":"300ms"}`)
	}
	d, err := time.ParseDuration(*body.Target)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("target: %q is invalid: must be a positive duration such as \"300ms\"", clip(*body.Target))
	}
	return d, nil
}

// parseShadowBody reads the body of PUT /shadow, {"shadow":true} or
// {"shadow":false}.
func parseShadowBody(b []byte) (bool, error) {
	var body struct {
		Shadow *bool `json:"shadow"`
	}
	if err := decodeBody(b, &body); err != nil {
		return false, fmt.Errorf(`body must be JSON like {"shadow":true}: %v`, err)
	}
	if body.Shadow == nil {
		return false, errors.New(`shadow is required: {"shadow":true} or {"shadow":false}`)
	}
	return *body.Shadow, nil
}

// handleShadow is PUT /shadow: body {"shadow":true|false}. It applies the
// running configuration with shadow changed — a new configuration
// version, and, as with a reload that changes shadow, every stage starts
// afresh (targets set through the API go back to the configured ones). A
// reload from the file brings back the file's shadow setting.
func (s *Server) handleShadow(w http.ResponseWriter, r *http.Request) {
	on, err := parseShadowBody(readAll(r))
	if err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	old, version, err := s.setShadow(on)
	if err != nil {
		adminError(w, http.StatusBadRequest, err.Error())
		return
	}
	if old != on {
		s.log.Info("shadow mode changed", "old", old, "new", on, "config_version", version, "from", r.RemoteAddr)
	}
	writeJSON(w, http.StatusOK, map[string]any{"shadow": on, "old": old, "config_version": version})
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // a redacted secret reads <redacted>; nosniff keeps the answer JSON

	_ = enc.Encode(v)
}

func adminError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
