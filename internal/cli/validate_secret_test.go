// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/secret"
	"github.com/sluicehq/sluice/proxy"
)

// sluice validate reads every secret's file and prints no secret, for a
// valid file or for any error.
func TestValidateShowsNoSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secrets := []string{"validate-token-5a9c0e7b3d1f", "validate-otlp-2e8b6d4f0a1c", "validate-key-a-7c3e9a1b5d0f",
		"validate-key-b-1f0d8b6e4c2a", "validate-redis-3b7d1f9e5a2c"}
	text := `listeners:
  - addr: 127.0.0.1:8080
admin:
  addr: 0.0.0.0:9901
  allow_public: true
  token_file: ` + write("token", secrets[0]+"\n") + `
  public: [metrics]
backends:
  servers:
    - url: http://127.0.0.1:8081
shares:
  total_bandwidth: 1MB
  clients:
    - {name: a, share: 10, api_keys_file: ` + write("keys", secrets[2]+"\n") + `}
    - {name: b, share: 10, api_keys: [` + secrets[3] + `]}
telemetry:
  otlp:
    endpoint: http://127.0.0.1:4318
    traces: true
    headers: {api-key: ` + secrets[1] + `}
cluster:
  addrs: [127.0.0.1:1]
  username: validate-redis-user-0a4c
  password_file: ` + write("redis", secrets[4]+"\n") + `
`
	good := write("good.yaml", text)
	cfg, err := proxy.LoadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := secret.SetPaths(cfg), secret.Paths(&proxy.Config{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("the test sets the secrets %v, the configuration has %v: set every one", got, want)
	}
	var all []string
	secret.Visit(cfg, func(_ string, v secret.String) { all = append(all, v.Reveal()) })
	files := []string{good}
	for i, bad := range []string{
		strings.Replace(text, "http://127.0.0.1:8081", "http://127.0.0.1:8081/x?q=1", 1),
		strings.Replace(text, "api-key: "+secrets[1], "api-key: \""+secrets[1]+"\\r\\nx: y\"", 1),
		strings.Replace(text, "headers: {api-key: "+secrets[1]+"}", "headers: \"api-key="+secrets[1]+"\"", 1),
		strings.Replace(text, "api_keys: ["+secrets[3]+"]", "api_keys: "+secrets[3], 1),
		// The decoder quotes a value of up to 10 bytes whole.
		strings.Replace(text, "api_keys: ["+secrets[3]+"]", "api_keys: k-4d2a9e", 1),
		strings.Replace(text, "api_keys: ["+secrets[3]+"]", "api_keys: ["+secrets[2]+"]", 1),
		strings.Replace(text, "  public: [metrics]\n", "  public: [metrics]\n  token: "+secrets[0]+"\n", 1),
	} {
		files = append(files, write("bad"+string(rune('0'+i))+".yaml", bad))
	}
	code, out, errOut := runCLI(t, append([]string{"validate"}, files...)...)
	if code != 2 || !strings.Contains(out, good+": ok") || !strings.Contains(out, "admin API on 0.0.0.0:9901 behind a token (open: metrics)") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if n := strings.Count(errOut, "\n"); n < len(files) {
		t.Errorf("%d error lines for %d bad files:\n%s", n, len(files)-1, errOut)
	}
	for _, s := range append(all, "k-4d2a9e") {
		if strings.Contains(out+errOut, s) {
			t.Errorf("validate shows a secret (%.10s…):\n%s\n%s", s, out, errOut)
		}
	}
}
