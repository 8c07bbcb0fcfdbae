// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/secret"
)

// A secret written in the wrong shape is refused without its value, and
// so is a URL's password.
func TestConfigErrorsHideSecretValues(t *testing.T) {
	const value = "hunter2" // the decoder quotes a value of up to 10 bytes whole
	otlp := "telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n    traces: true\n"
	for _, tc := range []struct{ text, want string }{
		{otlp + "    headers: \"api-key=" + value + "\"\n", "telemetry.otlp.headers: a secret must be a mapping of names to values"},
		{otlp + "    headers: [" + value + "]\n", "telemetry.otlp.headers: a secret must be a mapping"},
		{"shares:\n  total_bandwidth: 1MB\n  clients: [{name: a, share: 10, api_keys: " + value + "}]\n", "shares.clients[0].api_keys: a secret must be a list of strings"},
		{"admin:\n  token: [" + value + "]\n", "admin.token: a secret must be a string"},
		{strings.Replace(otlp, "http://127.0.0.1:4318", "http://user:"+value+"@127.0.0.1:4318", 1), "telemetry.otlp.endpoint: \"http://user:xxxxx@127.0.0.1:4318\" is invalid"},
	} {
		_, err := Parse("p.yaml", []byte(goodHead+tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), value) {
			t.Errorf("%q: error %v, want %q without the value", tc.text, err, tc.want)
		}
	}
	_, err := Parse("p.yaml", []byte(strings.Replace(goodHead, "http://127.0.0.1:8081", "http://u:"+value+"@127.0.0.1:8081", 1)))
	if err == nil || strings.Contains(err.Error(), value) || !strings.Contains(err.Error(), "user info") {
		t.Errorf("a backend URL with a password: %v", err)
	}
}

// GET /config leaves out a secret read from its file, so that its output
// is a configuration that loads the same secrets; an inline secret is
// the placeholder, which a configuration refuses.
func TestAdminConfigWithSecretFiles(t *testing.T) {
	be := backend(t, echoHeaders)
	dir := t.TempDir()
	tok, hdr := filepath.Join(dir, "token"), filepath.Join(dir, "headers")
	must(t, os.WriteFile(tok, []byte(oldToken+"\n"), 0o600))
	must(t, os.WriteFile(hdr, []byte("api-key=k1\n"), 0o600))
	cfg := strings.Replace(baseConfig(be.URL, "telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:1\n    traces: true\n    headers_file: "+hdr+"\n"),
		"admin:\n  addr: 127.0.0.1:0\n", "admin:\n  addr: 127.0.0.1:0\n  token_file: "+tok+"\n", 1)
	p := startProxy(t, cfg)
	code, _, body := get(t, p.admin+"/config", p.bearer())
	if code != 200 || strings.Contains(body, " token:") || strings.Contains(body, " headers:") || !strings.Contains(body, "token_file: "+tok) {
		t.Fatalf("GET /config: %d\n%s", code, body)
	}
	again, err := Parse("running.yaml", []byte(body))
	if err != nil {
		t.Fatalf("GET /config does not load: %v\n%s", err, body)
	}
	if again.Admin.Token.Reveal() != oldToken || again.Telemetry.OTLP.Headers["api-key"].Reveal() != "k1" {
		t.Error("GET /config's output loads other secrets")
	}
	inline := strings.Replace(cfg, "  token_file: "+tok+"\n", "  token: "+oldToken+"\n", 1)
	p = startProxy(t, inline)
	_, _, body = get(t, p.admin+"/config", p.bearer())
	if !strings.Contains(body, "token: "+secret.Redacted) || strings.Contains(body, oldToken) {
		t.Fatalf("GET /config with an inline token:\n%s", body)
	}
	if _, err := Parse("running.yaml", []byte(body)); err == nil || !strings.Contains(err.Error(), "admin.token: is the placeholder") {
		t.Errorf("the placeholder pasted back: %v", err)
	}
}

// A Go program that sets a _file field reads it with ResolveSecrets.
func TestResolveSecrets(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(tok, []byte(oldToken+"\n"), 0o600))
	cfg := Config{Listeners: []ListenerConfig{{Addr: "127.0.0.1:0"}}, Admin: AdminConfig{Addr: "0.0.0.0:9901", AllowPublic: true, TokenFile: tok},
		Backends: BackendsConfig{Servers: []ServerConfig{{URL: "http://127.0.0.1:1"}}}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "admin.token: required") {
		t.Fatalf("before ResolveSecrets: %v", err)
	}
	if err := cfg.ResolveSecrets(); err != nil || cfg.Admin.Token.Reveal() != oldToken {
		t.Fatalf("ResolveSecrets: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
