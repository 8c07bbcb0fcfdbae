// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/proxy"
)

// TestBadValues: values the chart cannot honour are refused at render
// time (helm install and helm template alike) with a message that names
// the value, never rendered into a pod that fails later.
func TestBadValues(t *testing.T) {
	for _, c := range []struct {
		name, kube, values string
		want               []string
	}{
		{"unknown mode", "1.31.0", edgeValues + "mode: gateway\n", []string{"/mode", "edge", "sidecar"}},
		{"edge without upstream", "1.31.0", "{}", []string{"upstream.url is required"}},
		{"sidecar without image", "1.31.0", "mode: sidecar\n", []string{"app.container.image is required"}},
		{"the chart's listeners", "1.31.0", edgeValues + "config: {listeners: [{addr: '0.0.0.0:80'}]}\n", []string{"config.listeners is the chart's", "listener.*"}},
		{"the chart's admin", "1.31.0", edgeValues + "config: {admin: {addr: '0.0.0.0:9000'}}\n", []string{"config.admin is the chart's", "admin.*"}},
		{"the chart's temp_dir", "1.31.0", edgeValues + "config: {response_buffering: {temp_dir: /var/tmp, max_disk_bytes: 1}}\n", []string{"config.response_buffering.temp_dir is the chart's"}},
		{"the chart's addr", "1.31.0", edgeValues + "listener: {port: 8080, addr: '0.0.0.0:80'}\n", []string{"listener.addr is the chart's"}},
		{"unbounded bodies", "1.31.0", edgeValues + "listener: {port: 8080, max_request_body_bytes: -1}\n", []string{"listener.max_request_body_bytes is -1"}},
		{"unbounded connections", "1.31.0", edgeValues + "config: {max_client_connections: null}\n", []string{"config.max_client_connections must be set"}},
		{"a latency between buckets", "1.31.0", edgeValues + "alerts: {slos: [{name: a, stages: '.+', latency: '0.3', objective: 0.99}]}\n", []string{"/alerts/slos/0/latency"}},
		{"an objective of 100 %", "1.31.0", edgeValues + "alerts: {slos: [{name: a, stages: '.+', latency: '0.5', objective: 1}]}\n", []string{"/alerts/slos/0/objective"}},
		{"the chart's admin address", "1.31.0", edgeValues + "admin: {config: {addr: '127.0.0.1:9901'}}\n", []string{"admin.config.addr is the chart's"}},
		{"a short token", "1.31.0", edgeValues + "admin: {token: short}\n", []string{"/admin/token"}},
		{"the app's preStop", "1.31.0", sidecarValues + "    lifecycle: {preStop: {sleep: {seconds: 1}}}\n", []string{"app.container.lifecycle.preStop is the chart's"}},
		{"a misspelt value", "1.31.0", edgeValues + "replicas: 3\n", []string{"replicas"}},
		{"Kubernetes 1.24", "1.24.0", edgeValues, []string{"kubeVersion", "1.24"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := renderErr(t, c.kube, c.values)
			if err == nil {
				t.Fatal("rendered")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestAdminPublicMetrics: admin.public [metrics] opens /metrics in
// sluice's configuration; the ServiceMonitor then sends no token and the
// pods carry the prometheus.io scrape annotations.
func TestAdminPublicMetrics(t *testing.T) {
	o := render(t, "1.31.0", edgeValues+monitoringValues+"admin: {public: [metrics]}\n")
	cm := o.configMap("sluice-config")
	if cm == nil || !strings.Contains(cm.Data["sluice.yaml"], "public:\n  - metrics\n") {
		t.Fatalf("admin.public is not in sluice.yaml:\n%v", cm)
	}
	if a := o.serviceMonitors[0].Spec.Endpoints[0].Authorization; a != nil {
		t.Errorf("the ServiceMonitor sends a token for a public /metrics: %+v", a)
	}
	ann := o.deployments[0].Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "9901" || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v", ann)
	}
	// Without it, no annotation invites a scraper that has no token.
	o = render(t, "1.31.0", edgeValues)
	if _, ok := o.deployments[0].Spec.Template.Annotations["prometheus.io/scrape"]; ok {
		t.Error("scrape annotations on pods whose /metrics needs the token")
	}
	if _, ok := reflect.TypeFor[proxy.AdminConfig]().FieldByName("Public"); !ok {
		t.Skip("this build's proxy.AdminConfig has no public list (the admin lock lands with it): the configuration is not run")
	}
	p := startProxy(t, cm.Data["sluice.yaml"], "a-token-of-at-least-16-chars")
	if code, body := p.get(t, p.admin+"/metrics", false); code != 200 || !strings.Contains(body, "proxy_ready") {
		t.Errorf("GET /metrics without the token: %d", code)
	}
	if code, _ := p.get(t, p.admin+"/state", false); code != 401 {
		t.Errorf("GET /state without the token: %d, want 401", code)
	}
}

// TestConfigReload: with configReload watch (the default) a change that
// a reload applies (a stage's SLO) keeps the pods, one that needs a
// restart (the policer) rolls them; with restart every change rolls them.
func TestConfigReload(t *testing.T) {
	sum := func(values string) string {
		return render(t, "1.31.0", edgeValues+values).deployments[0].Spec.Template.Annotations["checksum/sluice-restart"]
	}
	stages := "  stages: [{name: all, match: {path_prefix: /}, controller: auto, params: {slo: 250ms}}]\n"
	base, slo, policer := sum(""), sum("config:\n"+stages),
		sum("config:\n  policer: {rate: 1000, burst: 100}\n")
	if base == "" || slo != base || policer == base {
		t.Errorf("watch: checksums %q, after an SLO change %q, after a policer change %q", base, slo, policer)
	}
	r := "configReload: restart\n"
	if a, b := sum(r), sum(r+"config:\n"+stages); a == b {
		t.Error("restart: an SLO change does not roll the pods")
	}
	o := render(t, "1.31.0", edgeValues+r)
	if strings.Contains(o.configMap("sluice-config").Data["sluice.yaml"], "watch_config") {
		t.Error("restart: sluice.yaml still watches itself")
	}
}

// TestTokenModeWithoutFSGroup: without an fsGroup the token file is
// world-readable in the sluice container (the only one that mounts it),
// so that user 65532 can read it; with one, only its group can.
func TestTokenModeWithoutFSGroup(t *testing.T) {
	for _, c := range []struct {
		values string
		mode   int32
	}{{"", 0o440}, {"podSecurityContext: {fsGroup: null}\n", 0o444}} {
		d := render(t, "1.31.0", edgeValues+c.values).deployments[0]
		if v := volume(d.Spec.Template.Spec, "sluice-admin"); v == nil || *v.Secret.DefaultMode != c.mode {
			t.Errorf("values %q: the token's mode is %o, want %o", c.values, *v.Secret.DefaultMode, c.mode)
		}
	}
}

// TestImage: the image is the chart's appVersion by default, another tag
// or a digest when given.
func TestImage(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for values, want := range map[string]string{
		"":                                  "ghcr.io/sluicehq/sluice:" + loadChart(t).AppVersion(),
		"image: {tag: 9.9.9}\n":             "ghcr.io/sluicehq/sluice:9.9.9",
		"image: {digest: " + digest + "}\n": "ghcr.io/sluicehq/sluice@" + digest,
	} {
		if got := render(t, "1.31.0", edgeValues+values).deployments[0].Spec.Template.Spec.Containers[0].Image; got != want {
			t.Errorf("values %q: image %s, want %s", values, got, want)
		}
	}
}
