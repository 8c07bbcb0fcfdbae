package proxy

import (
	"encoding/json"
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
	"github.com/sluicehq/sluice/share"
	"github.com/sluicehq/sluice/stage"
)

// DefaultStateDecisions is how many recent decisions per stage GET /state
// shows unless ?decisions=N says otherwise (at most 1000).
const DefaultStateDecisions = 10

// adminHandler serves the admin API:
//
//	GET  /healthz                 200 while the process is alive (never shed, no token)
//	GET  /readyz                  200 when sluice can serve, else 503 and why (health.go; no token)
//	GET  /metrics                 Prometheus metrics (sluice_* and proxy_*)
//	GET  /state                   JSON: stages, classes, decisions, backends, queue
//	GET  /config                  the running configuration (YAML; JSON with ?format=json
//	                              or Accept: application/json)
//	POST /reload                  re-read the configuration file (400 with the error if invalid)
//	PUT  /stages/{name}/target    body {"target":"300ms"}: set a stage's response-time target
//	PUT  /shadow                  body {"shadow":true}: shadow mode on or off
//	GET  /ui, /ui/events          the live dashboard and its event stream (internal/dashboard)
//	     /debug/pprof/            only with admin.pprof: true
func (s *Server) adminHandler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorLog: serverLog(s.log)}))
	mux.HandleFunc("GET /healthz", serveHealthz)
	mux.HandleFunc("GET /readyz", s.ready.serve)
	mux.HandleFunc("GET /state", s.handleState)
	mux.HandleFunc("GET /config", s.handleConfig)
	mux.Handle("POST /reload", s.auth.requireBearer(http.HandlerFunc(s.handleReload)))
	mux.Handle("PUT /stages/{name}/target", s.auth.requireBearer(http.HandlerFunc(s.handleTarget)))
	mux.HandleFunc("GET /ui", s.dash.ServePage)
	mux.HandleFunc("GET /ui/events", s.dash.ServeEvents)
	mux.Handle("PUT /shadow", s.auth.requireBearer(http.HandlerFunc(s.handleShadow)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "sluice admin\n\nGET  /ui                        live dashboard\nGET  /healthz\nGET  /readyz\nGET  /metrics\nGET  /state[?decisions=N]\nGET  /config[?format=json]\nPOST /reload\nPUT  /stages/{name}/target  {\"target\":\"300ms\"}\nPUT  /shadow                {\"shadow\":true}\n")
		if withPprof {
			_, _ = io.WriteString(w, "GET  /debug/pprof/\n")
		}
		if s.auth.enabled() {
			_, _ = io.WriteString(w, "\n/ui, its event stream, /debug/pprof and every PUT and POST need the admin token (Authorization: Bearer TOKEN).\n")
		}
	})
	if withPprof {
		pp := http.NewServeMux()
		pp.HandleFunc("/debug/pprof/", pprof.Index)
		pp.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		pp.HandleFunc("/debug/pprof/profile", pprof.Profile)
		pp.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		pp.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.Handle("/debug/pprof/", s.auth.requireBearer(pp))
	}
	return mux
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
	ResponseBuffering BufferState `json:"response_buffering"`
}

// State returns the proxy's state with the last n decisions per stage,
// rule and policer.
func (s *Server) State(n int) StateDoc {
	g := s.h.gen.Load()
	doc := StateDoc{ConfigVersion: g.version, LoadedAt: g.loaded, ConfigFile: s.file, Shadow: g.cfg.Shadow,
		InFlight: s.h.active.Load(), Streams: s.h.streams.Load(), Stages: g.pol.State(n), Backends: g.pool.State(),
		Resources: s.ov.resourceStates(g, n), ResponseBuffering: s.h.buf.state(&g.buf)}
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
	n := DefaultStateDecisions
	if v := r.URL.Query().Get("decisions"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 0 || k > 1000 {
			adminError(w, http.StatusBadRequest, fmt.Sprintf("decisions=%q is invalid: must be an integer in [0, 1000]", v))
			return
		}
		n = k
	}
	writeJSON(w, http.StatusOK, s.State(n))
}

func (s *Server) handleConfig(w http.ResponseWriter, r *http.Request) {
	cfg := s.h.gen.Load().cfg
	if cfg.Admin.Token != "" {
		c := *cfg
		c.Admin.Token = redactedToken
		cfg = &c
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		adminError(w, http.StatusInternalServerError, "encoding the configuration: "+err.Error())
		return
	}
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		var v any
		if err := yaml.Unmarshal(out, &v); err != nil {
			adminError(w, http.StatusInternalServerError, "encoding the configuration: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, v)
		return
	}
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	_, _ = w.Write(out)
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
	var body struct {
		Target *string `json:"target"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		adminError(w, http.StatusBadRequest, `body must be JSON like {"target":"300ms"}: `+err.Error())
		return
	}
	if body.Target == nil {
		adminError(w, http.StatusBadRequest, `target is required: {"target":"300ms"}`)
		return
	}
	d, err := time.ParseDuration(*body.Target)
	if err != nil || d <= 0 {
		adminError(w, http.StatusBadRequest, fmt.Sprintf("target: %q is invalid: must be a positive duration such as \"300ms\"", *body.Target))
		return
	}
	st := s.h.gen.Load().pol.Stage(name)
	if st == nil {
		adminError(w, http.StatusNotFound, fmt.Sprintf("no stage %q", name))
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func adminError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
