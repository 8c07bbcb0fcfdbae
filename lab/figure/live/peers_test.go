// SPDX-License-Identifier: Apache-2.0

package live

import (
	"bytes"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/control"
)

func TestPeersRegistered(t *testing.T) {
	e, err := Lookup("peers")
	if err != nil {
		t.Fatal(err)
	}
	if e.Run == nil || e.Paper == "" || e.Description == "" {
		t.Errorf("peers: incomplete definition %+v", e)
	}
}

// TestPeersSEDAAdditiveIncrease: the seda stage's additive increase is
// 2% of the measured capacity, at least 1 (TestPoliciesValidate checks
// that the proxy accepts the policies).
func TestPeersSEDAAdditiveIncrease(t *testing.T) {
	for capacity, want := range map[float64]float64{391: 8, 10: 1} {
		ps := peersSEDAPolicy(capacity).Stages[0].Control.(*control.SEDAConfig)
		if ps.AdjI != want || ps.InitialRate != capacity {
			t.Errorf("capacity %g: params %+v, want adj_i %g and initial_rate %g", capacity, ps, want, capacity)
		}
	}
}

func validNginx() nginxConf {
	return nginxConf{Dir: "/tmp/x y", Listen: "127.0.0.1:8080", Backends: []string{"127.0.0.1:9090"}, Rate: 391, Burst: 49,
		TempPaths: nginxTempDirectives("")}
}

func TestNginxConf(t *testing.T) {
	c := validNginx()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	text := c.Text()
	for _, want := range []string{
		"worker_processes 1;",
		`pid "/tmp/x y/nginx.pid";`,
		"error_log stderr error;",
		"limit_req_zone $server_name zone=sluice_peers:1m rate=391r/s;",
		"limit_req_status 503;",
		"limit_req zone=sluice_peers burst=49;",
		"server_name sluice-peers;",
		"listen 127.0.0.1:8080;",
		"server 127.0.0.1:9090;",
		"proxy_pass http://backend;",
		`client_body_temp_path "/tmp/x y/client_body_temp";`,
		`scgi_temp_path "/tmp/x y/scgi_temp";`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("configuration lacks %q:\n%s", want, text)
		}
	}
	// nodelay would let the burst through at once: the requests beyond
	// the rate must wait instead. "daemon" is given on the command line.
	for _, bad := range []string{"nodelay", "daemon"} {
		if strings.Contains(text, bad) {
			t.Errorf("configuration contains %q:\n%s", bad, text)
		}
	}
	if strings.Count(text, "{") != strings.Count(text, "}") {
		t.Errorf("unbalanced braces:\n%s", text)
	}

	bad := []struct {
		field string
		mod   func(c *nginxConf)
	}{
		{"Dir", func(c *nginxConf) { c.Dir = "relative" }},
		{"Dir", func(c *nginxConf) { c.Dir = `/tmp/a"b` }},
		{"Rate", func(c *nginxConf) { c.Rate = 0 }},
		{"Burst", func(c *nginxConf) { c.Burst = -1 }},
		{"Listen", func(c *nginxConf) { c.Listen = "8080" }},
		{"Backends", func(c *nginxConf) { c.Backends = nil }},
	}
	for _, b := range bad {
		c := validNginx()
		b.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), b.field+"=") {
			t.Errorf("%s: Validate() = %v, want an error naming %s", b.field, err, b.field)
		}
	}
}

func TestNginxTempDirectives(t *testing.T) {
	cases := []struct {
		args string
		want []string
	}{
		{"", []string{"client_body_temp_path", "proxy_temp_path", "fastcgi_temp_path", "uwsgi_temp_path", "scgi_temp_path"}},
		{"--prefix=/usr --without-http_uwsgi_module --without-http_scgi_module",
			[]string{"client_body_temp_path", "proxy_temp_path", "fastcgi_temp_path"}},
		{"--without-http_fastcgi_module", []string{"client_body_temp_path", "proxy_temp_path", "uwsgi_temp_path", "scgi_temp_path"}},
	}
	for _, c := range cases {
		if got := nginxTempDirectives(c.args); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("nginxTempDirectives(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func validHAProxy() haproxyConf {
	return haproxyConf{Listen: "127.0.0.1:8080", Backends: []string{"127.0.0.1:9090"}, MaxConn: 4, QueueTimeout: 125 * time.Millisecond,
		IdleTimeout: 30 * time.Second}
}

func TestHAProxyConf(t *testing.T) {
	c := validHAProxy()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	text := c.Text()
	for _, want := range []string{
		"mode http", "timeout queue 125ms", "timeout client 30000ms", "timeout server 30000ms",
		"bind 127.0.0.1:8080", "server app1 127.0.0.1:9090 maxconn 4", "default_backend app", "nbthread 1",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("configuration lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "daemon") {
		t.Errorf("configuration must not daemonize (-db runs it in the foreground):\n%s", text)
	}
	bad := []struct {
		field string
		mod   func(c *haproxyConf)
	}{
		{"MaxConn", func(c *haproxyConf) { c.MaxConn = 0 }},
		{"QueueTimeout", func(c *haproxyConf) { c.QueueTimeout = time.Microsecond }},
		{"IdleTimeout", func(c *haproxyConf) { c.IdleTimeout = 0 }},
		{"Listen", func(c *haproxyConf) { c.Listen = "localhost" }},
		{"Backends[0]", func(c *haproxyConf) { c.Backends = []string{"http://127.0.0.1:1"} }},
	}
	for _, b := range bad {
		c := validHAProxy()
		b.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), b.field+"=") {
			t.Errorf("%s: Validate() = %v, want an error naming %s", b.field, err, b.field)
		}
	}
}

// TestPeerConfigsAcceptedByTheBinaries asks the installed nginx and
// HAProxy to check the generated configurations (nginx -t, haproxy -c:
// nothing is served). Skipped with -short or when a binary is absent.
func TestPeerConfigsAcceptedByTheBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nginx -t and haproxy -c")
	}
	if path, ok := findPeerTool("nginx", exec.LookPath, peerSbinDirs); !ok {
		t.Log("nginx not installed; its configuration is not checked")
	} else {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		v, _ := exec.Command(path, "-V").CombinedOutput()
		c := validNginx()
		c.Dir, c.TempPaths = dir, nginxTempDirectives(string(v))
		conf := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(conf, []byte(c.Text()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(path, "-t", "-q", "-p", dir+"/", "-c", conf, "-g", "daemon off;").CombinedOutput(); err != nil {
			t.Errorf("nginx -t: %v\n%s\n%s", err, out, c.Text())
		}
	}
	if path, ok := findPeerTool("haproxy", exec.LookPath, peerSbinDirs); !ok {
		t.Log("haproxy not installed; its configuration is not checked")
	} else {
		conf := filepath.Join(t.TempDir(), "haproxy.cfg")
		if err := os.WriteFile(conf, []byte(validHAProxy().Text()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(path, "-c", "-q", "-f", conf).CombinedOutput(); err != nil {
			t.Errorf("haproxy -c: %v\n%s", err, out)
		}
	}
}

func TestFindPeerTool(t *testing.T) {
	have := map[string]bool{"/usr/sbin/nginx": true, "haproxy": true}
	look := func(p string) (string, error) {
		if have[p] {
			if !filepath.IsAbs(p) {
				return "/opt/bin/" + p, nil
			}
			return p, nil
		}
		return "", errors.New("not found")
	}
	dirs := []string{"/usr/local/sbin", "/usr/sbin"}
	cases := []struct {
		name, want string
		ok         bool
	}{
		{"nginx", "/usr/sbin/nginx", true},
		{"haproxy", "/opt/bin/haproxy", true},
		{"envoy", "", false},
	}
	for _, c := range cases {
		got, ok := findPeerTool(c.name, look, dirs)
		if got != c.want || ok != c.ok {
			t.Errorf("findPeerTool(%s) = %q, %v; want %q, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestPlanPeerInstall(t *testing.T) {
	both := peerTools
	cases := []struct {
		name    string
		missing []peerTool
		euid    int
		apt     string
		cmds    []string // joined with spaces
		errHas  []string
	}{
		{name: "nothing missing", missing: nil, euid: 1000, apt: ""},
		{name: "root with apt", missing: both, euid: 0, apt: "/usr/bin/apt-get", cmds: []string{
			"/usr/bin/apt-get update -q",
			"/usr/bin/apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold nginx haproxy",
		}},
		{name: "root, one missing", missing: both[1:], euid: 0, apt: "/usr/bin/apt-get", cmds: []string{
			"/usr/bin/apt-get update -q",
			"/usr/bin/apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold haproxy",
		}},
		{name: "not root", missing: both, euid: 1000, apt: "/usr/bin/apt-get",
			errHas: []string{"nginx and haproxy", "sudo apt-get update && sudo apt-get install -y nginx haproxy", "/usr/sbin"}},
		{name: "no apt", missing: both[:1], euid: 0, apt: "",
			errHas: []string{"apt-get is not available", "package manager", "apt-get install -y nginx"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmds, err := planPeerInstall(c.missing, c.euid, c.apt)
			if len(c.errHas) > 0 {
				if err == nil {
					t.Fatalf("want an error, got commands %q", cmds)
				}
				for _, s := range c.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, argv := range cmds {
				got = append(got, strings.Join(argv, " "))
			}
			if strings.Join(got, "\n") != strings.Join(c.cmds, "\n") {
				t.Errorf("commands =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.cmds, "\n"))
			}
		})
	}
}

func TestStepQuality(t *testing.T) {
	cases := []struct {
		now, at int64
		want    string
	}{
		{now: 100, at: 0, want: "0.5"},
		{now: 99, at: 100, want: "0.5"},
		{now: 100, at: 100, want: "1"},
		{now: 101, at: 100, want: "1"},
	}
	for _, c := range cases {
		if got := stepQuality(c.now, c.at); got != c.want {
			t.Errorf("stepQuality(%d, %d) = %s, want %s", c.now, c.at, got, c.want)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	b := newTailBuffer(8)
	for _, s := range []string{"abc", "defgh", "ij", ""} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := b.String(); got != "cdefghij" {
		t.Errorf("String() = %q, want the last 8 bytes cdefghij", got)
	}
	if _, err := b.Write(bytes.Repeat([]byte("z"), 20)); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != "zzzzzzzz" {
		t.Errorf("String() = %q after a long write", got)
	}
	if got := lastLine("a\nb\nc\n"); got != "c" {
		t.Errorf("lastLine = %q, want c", got)
	}
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func TestSummarizeWindow(t *testing.T) {
	sec := time.Second
	recs := []record{
		{intended: 0, done: ms(10), lat: ms(10), out: outOK},                  // before the window
		{intended: sec, done: sec + ms(100), lat: ms(100), out: outOK},        // good
		{intended: sec, done: sec + ms(300), lat: ms(300), out: outOK},        // OK, too slow
		{intended: sec, done: sec + ms(1), lat: ms(1), out: outRejected},      // rejected
		{intended: sec, done: sec + ms(1999), lat: ms(1999), out: outTimeout}, // counted at 2 s
		{intended: sec, done: sec + ms(5), lat: ms(5), out: outError},
		{intended: sec, done: sec + ms(5), lat: ms(5), out: outAborted},  // left out
		{intended: 3 * sec, done: 3*sec + ms(1), lat: ms(1), out: outOK}, // after the window
	}
	w := summarizeWindow(recs, sec, 3*sec, 250*time.Millisecond, 2*time.Second)
	if w.offered != 5 || w.ok != 2 || w.good != 1 || w.rejected != 1 || w.timeouts != 1 || w.err != 1 {
		t.Errorf("counts = %+v", w)
	}
	if w.goodput() != 0.5 || w.throughput() != 1 || w.offeredRate() != 2.5 || w.rejectFraction() != 0.2 {
		t.Errorf("rates: goodput %g throughput %g offered %g reject %g", w.goodput(), w.throughput(), w.offeredRate(), w.rejectFraction())
	}
	if w.mean != 200 {
		t.Errorf("mean = %g, want 200", w.mean)
	}
	// Admitted: 5, 100, 300, 2000 ms; the p90 is the timeout.
	if w.p90Admitted != 2000 {
		t.Errorf("p90Admitted = %g, want 2000 (the timeout)", w.p90Admitted)
	}
	if w.p90 > 300 || w.p90 < 100 {
		t.Errorf("p90 = %g, want within the OK latencies", w.p90)
	}
	empty := summarizeWindow(nil, 0, sec, time.Second, time.Second)
	if !math.IsNaN(empty.p90) || !math.IsNaN(empty.p90Admitted) || !math.IsNaN(empty.rejectFraction()) || empty.goodput() != 0 {
		t.Errorf("empty window = %+v, want NaN percentiles and zero goodput", empty)
	}
}

func TestPeerBins(t *testing.T) {
	recs := []record{
		{intended: ms(100), done: ms(200), lat: ms(100), out: outOK},
		{intended: ms(100), done: ms(600), lat: ms(500), out: outOK},
		{intended: ms(400), done: ms(450), lat: ms(50), out: outRejected},
		{intended: ms(600), done: ms(2600), lat: ms(2000), out: outTimeout}, // done past the end
		{intended: ms(700), done: ms(900), lat: ms(200), out: outAborted},
	}
	bins := peerBins(recs, 500*time.Millisecond, time.Second, 250*time.Millisecond, 2*time.Second)
	if len(bins) != 2 {
		t.Fatalf("%d bins, want 2", len(bins))
	}
	b0, b1 := bins[0], bins[1]
	if b0.t != 0 || b1.t != 0.5 {
		t.Errorf("bin starts %g, %g", b0.t, b1.t)
	}
	if b0.offered != 3 || b0.ok != 1 || b0.good != 1 || b0.rejected != 1 || b0.fails != 0 {
		t.Errorf("bin 0 = %+v", b0)
	}
	if b1.offered != 1 || b1.ok != 1 || b1.good != 0 || b1.fails != 0 || b1.p90 != 500 {
		t.Errorf("bin 1 = %+v", b1)
	}
}

// TestPeersRows: --rows keeps the experiment's order and refuses an
// unknown row.
func TestPeersRows(t *testing.T) {
	rows, err := peersRows([]string{"yaksha", "seda"})
	if err != nil || len(rows) != 2 || rows[0].name != "seda" || rows[1].name != "yaksha" {
		t.Errorf("rows %v, %v: want seda then yaksha", rows, err)
	}
	if rows, _ := peersRows(nil); len(rows) != len(peersSystems) {
		t.Errorf("no selection gave %d rows, want all %d", len(rows), len(peersSystems))
	}
	if _, err := peersRows([]string{"envoy"}); err == nil || !strings.Contains(err.Error(), `"envoy"`) {
		t.Errorf("unknown row: %v", err)
	}
}
