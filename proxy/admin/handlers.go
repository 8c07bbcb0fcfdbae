// SPDX-License-Identifier: Apache-2.0

package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/secret"
)

// DefaultStateDecisions is how many recent decisions per stage GET /state
// shows unless ?decisions=N says otherwise (at most MaxStateDecisions).
const DefaultStateDecisions = 10

// MaxStateDecisions is the most decisions per stage GET /state shows.
const MaxStateDecisions = 1000

func (api *API) handleState(w http.ResponseWriter, r *http.Request) {
	n, err := parseDecisions(r.URL.Query().Get("decisions"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, api.srv.State(n))
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
func (api *API) handleConfig(w http.ResponseWriter, r *http.Request) {
	var doc yaml.Node
	if err := doc.Encode(api.srv.RunningConfig()); err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the configuration: "+err.Error())
		return
	}
	dropResolvedSecrets(&doc)
	if r.URL.Query().Get("format") == "json" || strings.Contains(r.Header.Get("Accept"), "application/json") {
		var v any
		if err := doc.Decode(&v); err != nil {
			writeError(w, http.StatusInternalServerError, "encoding the configuration: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, v)
		return
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the configuration: "+err.Error())
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

func (api *API) handleReload(w http.ResponseWriter, r *http.Request) {
	version, err := api.srv.Reload()
	if err != nil {
		api.log.Warn("reload refused; the running configuration stays", "err", err, "from", r.RemoteAddr)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "reloaded", "config_version": version})
}

func (api *API) handleTarget(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	d, err := parseTargetBody(readAll(r))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	old, err := api.srv.SetTarget(name, d)
	switch {
	case errors.Is(err, ErrNoStage):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no stage %q", clip(name)))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	api.log.Info("stage target changed", "stage", name, "old", old, "new", d.String(), "from", r.RemoteAddr)
	writeJSON(w, http.StatusOK, map[string]string{"stage": name, "old": old, "target": d.String()})
}

// readAll returns the body the guard read (at most MaxBodyBytes).
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
func (api *API) handleShadow(w http.ResponseWriter, r *http.Request) {
	on, err := parseShadowBody(readAll(r))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	old, version, err := api.srv.SetShadow(on)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if old != on {
		api.log.Info("shadow mode changed", "old", old, "new", on, "config_version", version, "from", r.RemoteAddr)
	}
	writeJSON(w, http.StatusOK, map[string]any{"shadow": on, "old": old, "config_version": version})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // a redacted secret reads <redacted>; nosniff keeps the answer JSON

	_ = enc.Encode(v)
}

// writeError writes the admin API's JSON error answer, {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
