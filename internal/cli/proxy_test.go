// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/internal/secret"
	"github.com/sluicehq/sluice/policy"
	"github.com/sluicehq/sluice/proxy/buffer"
)

func TestProxyUsageErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("listeners:\n  - addr: 127.0.0.1:8080\nbackends:\n  servers:\n    - url: http://127.0.0.1:8081\n      max_conc: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An address in use: exit 2 naming the file, line and field.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := filepath.Join(t.TempDir(), "in-use.yaml")
	if err := os.WriteFile(inUse, []byte("backends:\n  servers: [{url: http://127.0.0.1:8081}]\nlisteners:\n  - addr: "+busy.Addr().String()+"\nadmin: {addr: 127.0.0.1:0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	short, empty := filepath.Join(t.TempDir(), "short"), filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(short, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A token file that holds what GET /config prints, as a config
	// file's admin.token_file may not.
	placeholder := filepath.Join(t.TempDir(), "placeholder")
	if err := os.WriteFile(placeholder, []byte(secret.Redacted+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"proxy", "--config", inUse}, "in-use.yaml:4: listeners[0].addr: \"" + busy.Addr().String() + "\" cannot be bound: address already in use"},
		{[]string{"proxy", "--listen", busy.Addr().String(), "--backend", "http://127.0.0.1:1", "--admin", "127.0.0.1:0"}, "--listen: listeners[0].addr"},
		{[]string{"proxy"}, "give --config FILE"},
		{[]string{"proxy", "--listen", "127.0.0.1:0"}, "give --config FILE"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--controller", "seda"}, "needs --target-p90"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--controller", "yaksha"}, "needs --target-mean"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--controller", "kihl"}, `--controller "kihl" is invalid`},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--controller", "seda", "--target-p90", "-1s"}, "--target-p90: stages[0].params.target"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--slo", "-1s"}, "--slo: stages[0].params.slo"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--trusted-proxy", "10.0.0.1/8"}, "--trusted-proxy: classes.trusted_proxies[0]"},
		{[]string{"proxy", "--listen", "nowhere", "--backend", "http://127.0.0.1:1"}, "--listen: listeners[0].addr"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "ftp://x"}, "--backend: backends.servers[0].url"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--admin", "0.0.0.0:9901"}, "--admin: admin.addr"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--controller", "seda", "--target-p90", "1s", "--target-mean", "1s"}, "--target-mean is for --controller yaksha"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--target-p90", "1s"}, "--target-p90 is for --controller seda, not auto"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--controller", "bbr", "--slo", "1s"}, "--slo is for --controller auto"},
		{[]string{"proxy", "--config", bad, "--listen", "127.0.0.1:0"}, "--listen is a quick-start flag"},
		{[]string{"proxy", "--config", bad}, "bad.yaml:6: backends.servers[0].max_conc: unknown field"},
		{[]string{"proxy", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, "missing.yaml: open"},
		{[]string{"proxy", "--log-level", "loud", "--config", bad}, "--log-level"},
		{[]string{"proxy", "--log-format", "xml", "--config", bad}, `--log-format "xml" is invalid: must be text or json`},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--admin-token-file", short}, "--admin-token-file: admin.token_file: the token in " + strconv.Quote(short) + " is invalid: too short"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--admin-token-file", placeholder}, "holds the placeholder"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--admin-token-file", empty}, "--admin-token-file: admin.token_file: " + strconv.Quote(empty) + " is empty"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--admin-token-file", filepath.Join(t.TempDir(), "none")}, "--admin-token-file: admin.token_file: "},
		{[]string{"proxy", "--config", bad, "--admin-token-file", short}, "--admin-token-file is a quick-start flag"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--cluster-instance", "a"}, "--cluster-instance needs --cluster-redis"},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--cluster-redis", "redis"}, `cluster.addrs[0]: "redis" is invalid`},
		{[]string{"proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--cluster-redis", "127.0.0.1:6379", "--cluster-instance", "a b"}, `cluster.instance: "a b" is invalid`},
	}
	for _, c := range cases {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 with %q", c.args, code, errOut, c.want)
		}
	}
}

// Two objective flags that are both for other controllers: the error
// names the first of slo, target-p90, target-mean, on every run (the
// check once ranged over a map, and named either at random).
func TestQuickStartMisplacedObjectivesInOrder(t *testing.T) {
	for range 16 {
		code, _, errOut := runCLI(t, "proxy", "--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1",
			"--controller", "bbr", "--target-mean", "1s", "--target-p90", "1s", "--slo", "1s")
		if want := "--slo is for --controller auto, not bbr"; code != 2 || !strings.Contains(errOut, want) {
			t.Fatalf("exit %d, stderr %q; want 2 with %q", code, errOut, want)
		}
	}
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proxyCmd is `sluice proxy` running in the test, and a client for it.
type proxyCmd struct {
	errOut bytes.Buffer // the command's standard error: its log
	cancel context.CancelFunc
	done   chan error
	c      *http.Client
}

// startProxyCmd runs `sluice proxy` with args until stop (or the end of
// the test).
func startProxyCmd(t *testing.T, args ...string) *proxyCmd {
	p := &proxyCmd{done: make(chan error, 1), c: &http.Client{Timeout: 10 * time.Second}}
	root := NewRootCmd(io.Discard, &p.errOut)
	root.SetArgs(append([]string{"proxy"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	t.Cleanup(cancel)
	go func() { p.done <- root.ExecuteContext(ctx) }()
	return p
}

// get sends GET url and returns the answer's status and body.
func (p *proxyCmd) get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := p.c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// getWhenUp is get's body, the request retried every 10ms until the
// proxy listens (20s at most).
func (p *proxyCmd) getWhenUp(t *testing.T, url string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := p.c.Get(url)
		if err == nil {
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy did not come up: %v\n%s", err, p.errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop cancels the command and returns what it returned.
func (p *proxyCmd) stop(t *testing.T) error {
	t.Helper()
	p.cancel()
	select {
	case err := <-p.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("proxy did not stop")
		return nil
	}
}

func TestProxyQuickStartServesAndStops(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from the backend")
	}))
	defer be.Close()
	listen, admin := freeAddr(t), freeAddr(t)
	p := startProxyCmd(t, "--listen", listen, "--backend", be.URL, "--admin", admin, "--pprof")
	if body := p.getWhenUp(t, "http://"+listen+"/"); body != "hello from the backend" {
		t.Errorf("body %q", body)
	}
	// With no other flag the quick start runs auto at its default SLO.
	if _, b := p.get(t, "http://"+admin+"/state"); !strings.Contains(b, `"controller": "auto"`) || !strings.Contains(b, `"target": "500ms"`) {
		t.Errorf("state: %s", b)
	}
	// sluice_build_info says what `sluice version` says.
	v := Version()
	want := `sluice_build_info{goversion="` + v.GoVersion + `",revision="` + v.Commit + `",version="` + v.Version + `"} 1`
	if _, m := p.get(t, "http://"+admin+"/metrics"); !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	// --pprof serves the profiler on the admin address.
	if code, _ := p.get(t, "http://"+admin+"/debug/pprof/cmdline"); code != http.StatusOK {
		t.Errorf("--pprof: /debug/pprof/cmdline answered %d", code)
	}
	if err := p.stop(t); err != nil {
		t.Errorf("proxy returned %v, want nil after a clean stop", err)
	}
}

// --log-format json writes every log line as one JSON object with slog's
// time, level and msg keys, for a log shipper to parse.
func TestProxyLogFormatJSON(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer be.Close()
	listen, admin := freeAddr(t), freeAddr(t)
	p := startProxyCmd(t, "--listen", listen, "--backend", be.URL, "--admin", admin, "--log-format", "json")
	p.getWhenUp(t, "http://"+admin+"/healthz")
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	msgs := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(p.errOut.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("line %q lacks %q", line, k)
			}
		}
		msg, _ := rec["msg"].(string)
		msgs[msg] = true
	}
	for _, m := range []string{"sluice proxy serving", "stopped"} {
		if !msgs[m] {
			t.Errorf("no %q line in %s", m, p.errOut.String())
		}
	}
}

// The quick start's seda stage has a bucket deep enough for arrival
// jitter; the other controllers keep the stage default.
func TestProxyQuickStartSEDABurst(t *testing.T) {
	for _, c := range []struct {
		controller string
		burst      int
	}{{"seda", quickStartSEDABurst}, {"auto", policy.DefaultBurst}} {
		f := &proxyFlags{listen: "127.0.0.1:0", backends: []string{"http://127.0.0.1:1"}, controller: c.controller,
			targetP90: time.Second, admin: "127.0.0.1:0"}
		if c.controller != "seda" {
			f.targetP90 = 0
		}
		cfg, err := f.quickStart(&cobra.Command{})
		if err != nil {
			t.Fatalf("%s: %v", c.controller, err)
		}
		if got := cfg.Stages[0].Burst; got != c.burst {
			t.Errorf("%s: stage burst %d, want %d", c.controller, got, c.burst)
		}
	}
}

// The quick start buffers responses unless --response-buffering=false.
func TestProxyQuickStartResponseBuffering(t *testing.T) {
	for _, args := range [][]string{nil, {"--response-buffering=false"}} {
		cmd := NewProxyCmd()
		if err := cmd.ParseFlags(append([]string{"--listen", "127.0.0.1:0", "--backend", "http://127.0.0.1:1", "--admin", "127.0.0.1:0"}, args...)); err != nil {
			t.Fatal(err)
		}
		f := &proxyFlags{listen: "127.0.0.1:0", backends: []string{"http://127.0.0.1:1"}, controller: "auto", admin: "127.0.0.1:0"}
		f.buffering, _ = cmd.Flags().GetBool("response-buffering")
		cfg, err := f.quickStart(cmd)
		if err != nil {
			t.Fatal(err)
		}
		want := args == nil
		if got := cfg.ResponseBuffering.Enabled; got == nil || *got != want {
			t.Errorf("%v: response_buffering.enabled %v, want %v", args, got, want)
		}
		if cfg.ResponseBuffering.MemoryBytes != buffer.DefaultMemoryBytes {
			t.Errorf("%v: memory_bytes %d, want the default", args, cfg.ResponseBuffering.MemoryBytes)
		}
	}
}

// The quick start's hops: --trusted-proxy believes the hop in front; the
// upstream calls are neither retried nor throttled (a chain of quick
// starts cannot multiply a request), and deadlines are read and passed on.
func TestProxyQuickStartHops(t *testing.T) {
	f := &proxyFlags{listen: "127.0.0.1:0", backends: []string{"http://127.0.0.1:1"}, controller: "auto",
		admin: "127.0.0.1:0", trusted: []string{"127.0.0.1", "10.0.0.0/8"}}
	cfg, err := f.quickStart(&cobra.Command{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Classes.TrustedProxies; len(got) != 2 || got[0] != "127.0.0.1" {
		t.Errorf("trusted proxies %v", got)
	}
	u := cfg.Backends.Client
	if *u.Throttle.Enabled || u.Retry.MaxAttempts != 1 || cfg.Hops.TimeoutHeader != "X-Sluice-Timeout" || cfg.Hops.MaxTimeout != policy.DefaultMaxTimeout {
		t.Errorf("upstream client %+v, hops %+v", u, cfg.Hops)
	}
}
