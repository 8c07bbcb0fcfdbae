// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"net"
	"os"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/proxy"
)

const edgeValues = `
upstream: {url: "http://app-backend.shop.svc.cluster.local:8080"}
`

const sidecarValues = `
mode: sidecar
app:
  container:
    name: shop
    image: registry.example.com/shop:2.1
    ports: [{name: app, containerPort: 8081}]
    readinessProbe: {httpGet: {path: /readyz, port: app}}
`

const monitoringValues = `
metrics: {serviceMonitor: {enabled: true}}
alerts: {prometheusRule: {enabled: true}}
grafana: {dashboard: {enabled: true}}
autoscaling: {enabled: true}
`

// mode is one way the chart is rendered, with what the pod must look like.
type mode struct {
	name, kube, values string
	sidecar            bool
	native             bool // sluice is an init container with restartPolicy Always
	sleepAction        bool // preStop hooks use the sleep action
	monitoring         bool // ServiceMonitor, PrometheusRule, dashboard, HPA
}

var modes = []mode{
	{name: "edge", kube: "1.31.0", values: edgeValues, sleepAction: true},
	{name: "edge-1.28", kube: "1.28.0", values: edgeValues},
	{name: "edge-monitoring", kube: "1.31.0", values: edgeValues + monitoringValues, sleepAction: true, monitoring: true},
	{name: "sidecar-classic-1.28", kube: "1.28.0", values: sidecarValues, sidecar: true},
	{name: "sidecar-native-1.29", kube: "1.29.0", values: sidecarValues, sidecar: true, native: true},
	{name: "sidecar-native", kube: "1.31.0", values: sidecarValues + monitoringValues, sidecar: true, native: true, sleepAction: true, monitoring: true},
	{name: "sidecar-classic-forced", kube: "1.31.0", values: sidecarValues + "sidecar: {native: false}\n", sidecar: true, sleepAction: true},
}

// TestChartModes renders the chart in every mode and checks each object
// against the others and against a sluice proxy run from the rendered
// ConfigMap.
func TestChartModes(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			checkMode(t, m, render(t, m.kube, m.values))
		})
	}
}

// pod is what checkMode found in the one Deployment.
type pod struct {
	d      *appsv1.Deployment
	spec   corev1.PodSpec
	sluice *corev1.Container
	app    *corev1.Container
	cfg    *proxy.Config
	text   string // sluice.yaml as rendered
	token  string // the admin token the pod reads
	secret string // its Secret's name
}

func checkMode(t *testing.T, m mode, o *objects) {
	if len(o.deployments) != 1 {
		t.Fatalf("%d Deployments, want 1", len(o.deployments))
	}
	p := checkPod(t, m, o)
	checkShutdown(t, m, p)
	checkTmp(t, p)
	checkServices(t, m, o, p)
	checkNetworkPolicy(t, m, o, p)
	if len(o.pdbs) != 1 || !labelsMatch(o.pdbs[0].Spec.Selector.MatchLabels, p.d.Spec.Template.Labels) {
		t.Errorf("the PodDisruptionBudgets %v do not select the pods", o.pdbs)
	}
	r := startProxy(t, p.text, p.token)
	checkServing(t, p, r)
	if !m.monitoring {
		if len(o.serviceMonitors)+len(o.rules)+len(o.hpas) != 0 || o.configMap(p.d.Name+"-dashboard") != nil {
			t.Errorf("monitoring objects rendered with monitoring off")
		}
		return
	}
	checkHPA(t, o, p, r)
	checkServiceMonitor(t, o, p, r)
	checkPrometheusRule(t, o)
	if cm := o.configMap(p.d.Name + "-dashboard"); cm == nil || cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("no dashboard ConfigMap labelled for Grafana's sidecar")
	} else if want, _ := os.ReadFile(root + "/" + DashboardSource); cm.Data["sluice.json"] != string(want) {
		t.Errorf("the dashboard ConfigMap is not %s", DashboardSource)
	}
}

// checkPod checks the sluice container, its image, security, files and
// probes, and loads its configuration.
func checkPod(t *testing.T, m mode, o *objects) *pod {
	p := &pod{d: o.deployments[0], spec: o.deployments[0].Spec.Template.Spec}
	for i := range p.spec.InitContainers {
		if c := &p.spec.InitContainers[i]; c.Name == "sluice" {
			p.sluice = c
		}
	}
	native := p.sluice != nil
	for i := range p.spec.Containers {
		switch c := &p.spec.Containers[i]; {
		case c.Name == "sluice":
			if native {
				t.Fatal("sluice is both an init container and a container")
			}
			p.sluice = c
		case m.sidecar:
			p.app = c
		default:
			t.Errorf("edge mode has a container %s besides sluice", c.Name)
		}
	}
	if p.sluice == nil {
		t.Fatal("no container named sluice")
	}
	if native != m.native {
		t.Fatalf("native sidecar %v, want %v at Kubernetes %s", native, m.native, m.kube)
	}
	if native && (p.sluice.RestartPolicy == nil || *p.sluice.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
		t.Errorf("the native sidecar's restartPolicy is %v, want Always", p.sluice.RestartPolicy)
	}
	if m.sidecar && (p.app == nil || p.app.Name != "shop" || p.app.Image != "registry.example.com/shop:2.1" || p.app.ReadinessProbe == nil) {
		t.Fatalf("the app's container is not the one in the values: %+v", p.app)
	}
	c := p.sluice
	if want := "ghcr.io/sluicehq/sluice:" + loadChart(t).AppVersion(); c.Image != want {
		t.Errorf("image %s, want %s", c.Image, want)
	}
	sc := c.SecurityContext
	if sc == nil || !isTrue(sc.RunAsNonRoot) || sc.RunAsUser == nil || *sc.RunAsUser != 65532 || !isTrue(sc.ReadOnlyRootFilesystem) ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile == nil ||
		sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("sluice's security context is not hardened: %+v", sc)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources: %+v", c.Resources)
	}
	if isTrue(p.spec.AutomountServiceAccountToken) {
		t.Error("the service account token is mounted: sluice never calls the API server")
	}
	// The config file is a ConfigMap's key, in a directory mount.
	if len(c.Args) != 3 || c.Args[0] != "proxy" || c.Args[1] != "--config" {
		t.Fatalf("args %q, want proxy --config FILE", c.Args)
	}
	cm, key := mountedFile(t, p, c.Args[2], func(v *corev1.Volume) string {
		if v.ConfigMap == nil {
			return ""
		}
		return v.ConfigMap.Name
	})
	cmap := o.configMap(cm)
	if cmap == nil || cmap.Data[key] == "" {
		t.Fatalf("ConfigMap %s has no %s", cm, key)
	}
	p.text = cmap.Data[key]
	var raw map[string]any
	if err := yaml.Unmarshal([]byte(p.text), &raw); err != nil {
		t.Fatal(err)
	}
	tokenFile := raw["admin"].(map[string]any)["token_file"].(string)
	p.secret, key = mountedFile(t, p, tokenFile, func(v *corev1.Volume) string {
		if v.Secret == nil {
			return ""
		}
		return v.Secret.SecretName
	})
	// The token file is readable by sluice (user 65532): by its group
	// (the pod's fsGroup) at 0440, else as "other".
	if v := volume(p.spec, "sluice-admin"); v == nil || v.Secret == nil || v.Secret.DefaultMode == nil {
		t.Error("the token's Secret volume sets no mode")
	} else if mode, fsGroup := *v.Secret.DefaultMode, p.spec.SecurityContext.FSGroup; mode&0o004 == 0 && (fsGroup == nil || mode&0o040 == 0) || mode&0o002 != 0 {
		t.Errorf("the token file's mode %o with fsGroup %v: user 65532 cannot read it, or anyone may write it", mode, fsGroup)
	}
	if s := o.secret(p.secret); s != nil {
		p.token = string(s.Data[key])
	} else {
		p.token = "a-token-from-the-users-secret-0123"
	}
	if len(p.token) < 16 {
		t.Errorf("the admin token %q is shorter than 16", p.token)
	}
	var err error
	p.cfg, err = proxy.LoadFile(localConfig(t, p.text, p.token, ""))
	if err != nil {
		t.Fatalf("sluice.yaml: %v", err)
	}
	if p.cfg.WatchConfig <= 0 || p.d.Spec.Template.Annotations["checksum/sluice-restart"] == "" {
		t.Errorf("watch_config %v, restart checksum %q: a ConfigMap change is neither reloaded nor rolled out",
			p.cfg.WatchConfig, p.d.Spec.Template.Annotations["checksum/sluice-restart"])
	}
	// Ports and probes are the configuration's.
	ports := map[string]int32{}
	for _, cp := range c.Ports {
		ports[cp.Name] = cp.ContainerPort
	}
	lport, aport := port(t, "0.0.0.0", p.cfg.Listeners[0].Addr), port(t, "0.0.0.0", p.cfg.Admin.Addr)
	if ports["http"] != lport || ports["admin"] != aport {
		t.Errorf("container ports %v, the configuration listens on %s and admin %s", ports, p.cfg.Listeners[0].Addr, p.cfg.Admin.Addr)
	}
	if !p.cfg.Admin.AllowPublic || p.cfg.Admin.TokenFile == "" {
		t.Errorf("admin %+v: public without a token file", p.cfg.Admin)
	}
	for _, pr := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"startup", c.StartupProbe, "/healthz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil || pr.probe.HTTPGet.Path != pr.path || resolve(pr.probe.HTTPGet.Port, ports) != aport {
			t.Errorf("%s probe %+v, want GET %s on the admin port %d", pr.what, pr.probe, pr.path, aport)
		}
	}
	return p
}

// mountedFile finds the volume that holds file in the sluice container
// (a directory mount, never subPath, so that kubelet's updates reach it)
// and returns what name says of that volume and the file's key.
func mountedFile(t *testing.T, p *pod, file string, name func(*corev1.Volume) string) (string, string) {
	t.Helper()
	dir, key := path.Split(file)
	for _, vm := range p.sluice.VolumeMounts {
		if vm.MountPath != strings.TrimSuffix(dir, "/") {
			continue
		}
		if vm.SubPath != "" {
			t.Errorf("%s is mounted with subPath: kubelet never updates it", file)
		}
		if v := volume(p.spec, vm.Name); v != nil && name(v) != "" {
			return name(v), key
		}
	}
	t.Fatalf("%s is not in a mounted volume of the expected kind", file)
	return "", ""
}

// checkShutdown checks that the app's shutdown comes after sluice's
// drain (docs/operations.md, "Shutdown ordering"): P is the pause for
// the endpoints controller, D the drain_timeout.
func checkShutdown(t *testing.T, m mode, p *pod) {
	const pause = 5 // shutdown.preStopSeconds by default
	d := int64(p.cfg.DrainTimeout / time.Second)
	grace := *p.spec.TerminationGracePeriodSeconds
	sluiceStop := preStopSeconds(t, p.sluice, m.sleepAction)
	switch {
	case !m.sidecar:
		if want := int64(0); m.sleepAction {
			want = pause
			if sluiceStop != want {
				t.Errorf("sluice's preStop pause %d s, want %d", sluiceStop, want)
			}
		}
		if grace <= sluiceStop+d {
			t.Errorf("terminationGracePeriodSeconds %d is not above the pause %d s plus drain_timeout %d s", grace, sluiceStop, d)
		}
		return
	case m.native:
		// The kubelet stops sluice after the app: sluice needs no pause,
		// the app waits for the endpoints and the drain.
		if sluiceStop != 0 {
			t.Errorf("the native sidecar has a preStop of %d s: it would only delay the pod's end", sluiceStop)
		}
		sluiceStop = pause
	case m.sleepAction && sluiceStop != pause:
		t.Errorf("sluice's preStop pause %d s, want %d", sluiceStop, pause)
	}
	appStop := preStopSeconds(t, p.app, m.sleepAction)
	if appStop < sluiceStop+d {
		t.Errorf("the app stops after %d s, before sluice has drained (%d s pause + %d s drain_timeout)", appStop, sluiceStop, d)
	}
	if grace < appStop+10 {
		t.Errorf("terminationGracePeriodSeconds %d leaves the app (stopping after %d s) less than its 10 s to exit", grace, appStop)
	}
}

// preStopSeconds returns how long c's preStop hook waits: the sleep
// action, or `sleep N` run from the image when sleepAction is false.
func preStopSeconds(t *testing.T, c *corev1.Container, sleepAction bool) int64 {
	t.Helper()
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return 0
	}
	h := c.Lifecycle.PreStop
	switch {
	case h.Sleep != nil && sleepAction:
		return h.Sleep.Seconds
	case h.Exec != nil && !sleepAction && len(h.Exec.Command) == 2 && h.Exec.Command[0] == "sleep":
		n, err := strconv.ParseInt(h.Exec.Command[1], 10, 64)
		if err == nil {
			return n
		}
	}
	t.Fatalf("container %s's preStop %+v: want the sleep action only where it exists (%v)", c.Name, h, sleepAction)
	return 0
}

// checkTmp checks that /tmp is an emptyDir that holds every byte the
// configuration lets sluice write there, and not much more: request
// bodies (one per connection, beyond request_buffer_bytes) and the
// response buffers' temporary files.
func checkTmp(t *testing.T, p *pod) {
	var vm *corev1.VolumeMount
	for i := range p.sluice.VolumeMounts {
		if p.sluice.VolumeMounts[i].MountPath == "/tmp" {
			vm = &p.sluice.VolumeMounts[i]
		}
	}
	if vm == nil || volume(p.spec, vm.Name).EmptyDir == nil || volume(p.spec, vm.Name).EmptyDir.SizeLimit == nil {
		t.Fatal("/tmp is not an emptyDir with a sizeLimit: the root file system is read-only")
	}
	l, rb := p.cfg.Listeners[0], p.cfg.ResponseBuffering
	var raw struct {
		Listeners []struct {
			Dir string `json:"request_buffer_dir"`
		} `json:"listeners"`
		RB struct {
			Dir string `json:"temp_dir"`
		} `json:"response_buffering"`
	}
	if err := yaml.Unmarshal([]byte(p.text), &raw); err != nil || raw.Listeners[0].Dir != "/tmp" || raw.RB.Dir != "/tmp" {
		t.Errorf("the buffers' directories %+v are not the emptyDir /tmp (%v)", raw, err)
	}
	var need int64
	if l.RequestBuffering == nil || *l.RequestBuffering {
		need += int64(p.cfg.MaxClientConnections) * max(0, l.MaxRequestBodyBytes-l.RequestBufferBytes)
	}
	if *rb.Enabled && rb.MaxFileBytes != -1 {
		need += rb.MaxDiskBytes
	}
	limit := volume(p.spec, vm.Name).EmptyDir.SizeLimit.Value()
	if p.cfg.MaxClientConnections <= 0 || limit < need || limit > need+64<<20 {
		t.Errorf("/tmp's sizeLimit is %d bytes; the configuration may write %d (max_client_connections %d)", limit, need, p.cfg.MaxClientConnections)
	}
}

// checkServices: the clients' Service sends them to sluice's listener,
// and no Service that has a virtual IP exposes the admin port or the
// app's own port.
func checkServices(t *testing.T, m mode, o *objects, p *pod) {
	lport, aport := port(t, "0.0.0.0", p.cfg.Listeners[0].Addr), port(t, "0.0.0.0", p.cfg.Admin.Addr)
	clients := 0
	for _, s := range o.services {
		if !labelsMatch(s.Spec.Selector, p.d.Spec.Template.Labels) {
			t.Errorf("Service %s selects no pod of the chart", s.Name)
		}
		for _, sp := range s.Spec.Ports {
			target := sp.TargetPort.IntVal
			if sp.TargetPort.Type == intstr.String {
				t.Errorf("Service %s's targetPort %q is a name: a native sidecar's port names do not resolve everywhere", s.Name, sp.TargetPort.StrVal)
			}
			switch {
			case target == lport:
				clients++
			case target == aport && s.Spec.ClusterIP == corev1.ClusterIPNone && strings.HasSuffix(s.Name, "-metrics") && m.monitoring:
				// The ServiceMonitor's headless Service.
			default:
				t.Errorf("Service %s exposes port %d: only sluice's listener %d may be exposed", s.Name, target, lport)
			}
		}
	}
	if clients != 1 {
		t.Errorf("%d Services send clients to sluice's listener, want 1", clients)
	}
}

// checkNetworkPolicy: clients may reach the listener, only the
// monitoring namespace the admin port, nothing else in the pod.
func checkNetworkPolicy(t *testing.T, m mode, o *objects, p *pod) {
	if len(o.netpols) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1", len(o.netpols))
	}
	np := o.netpols[0]
	if !labelsMatch(np.Spec.PodSelector.MatchLabels, p.d.Spec.Template.Labels) || !slices.Contains(np.Spec.PolicyTypes, "Ingress") {
		t.Fatalf("the NetworkPolicy does not isolate the pods' ingress: %+v", np.Spec)
	}
	lport, aport := port(t, "0.0.0.0", p.cfg.Listeners[0].Addr), port(t, "0.0.0.0", p.cfg.Admin.Addr)
	allowed := map[int32][]string{}
	for _, r := range np.Spec.Ingress {
		for _, rp := range r.Ports {
			if len(r.From) == 0 {
				allowed[rp.Port.IntVal] = append(allowed[rp.Port.IntVal], "anyone")
			}
			for _, f := range r.From {
				if f.NamespaceSelector != nil {
					allowed[rp.Port.IntVal] = append(allowed[rp.Port.IntVal], "namespace "+f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
				}
			}
		}
	}
	want := map[int32][]string{lport: {"anyone"}, aport: {"namespace monitoring"}}
	if !reflect.DeepEqual(allowed, want) {
		t.Errorf("the NetworkPolicy admits %v, want %v", allowed, want)
	}
}

// checkServing: what the probes ask for, a proxy run from the rendered
// ConfigMap serves; and it forwards.
func checkServing(t *testing.T, p *pod, r *running) {
	eventually(t, "readiness probe "+p.sluice.ReadinessProbe.HTTPGet.Path, func() bool {
		code, _ := r.get(t, r.admin+p.sluice.ReadinessProbe.HTTPGet.Path, false)
		return code == 200
	})
	if code, body := r.get(t, r.admin+p.sluice.LivenessProbe.HTTPGet.Path, false); code != 200 || body != "ok\n" {
		t.Errorf("liveness probe: %d %q", code, body)
	}
	if code, body := r.get(t, r.url+"/", false); code != 200 || body != "ok" {
		t.Errorf("GET / through sluice: %d %q", code, body)
	}
}

// checkHPA: the HPA scales the Deployment on a pods metric that the
// prometheus-adapter rule serves and a proxy run from the ConfigMap
// exports.
func checkHPA(t *testing.T, o *objects, p *pod, r *running) {
	if len(o.hpas) != 1 {
		t.Fatalf("%d HPAs, want 1", len(o.hpas))
	}
	h := o.hpas[0]
	if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != p.d.Name || p.d.Spec.Replicas != nil {
		t.Errorf("the HPA scales %+v; the Deployment %s sets replicas %v", h.Spec.ScaleTargetRef, p.d.Name, p.d.Spec.Replicas)
	}
	if len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Pods == nil || h.Spec.Metrics[0].Pods.Target.AverageValue == nil ||
		h.Spec.Metrics[0].Pods.Target.AverageValue.Cmp(resource.MustParse("800m")) != 0 {
		t.Fatalf("the HPA's metrics: %+v, want one pods metric at an average of 0.8", h.Spec.Metrics)
	}
	metric := h.Spec.Metrics[0].Pods.Metric.Name
	checkAdapter(t, metric)
	for range 20 {
		if code, _ := r.get(t, r.url+"/", false); code != 200 {
			t.Fatalf("GET / through sluice: %d", code)
		}
	}
	eventually(t, "/metrics has "+metric, func() bool {
		_, body := r.get(t, r.admin+"/metrics", true)
		return hasMetric(body, metric)
	})
}

// checkAdapter: deploy/prometheus/prometheus-adapter.yaml serves metric
// as a pods metric.
func checkAdapter(t *testing.T, metric string) {
	b, err := os.ReadFile(root + "/deploy/prometheus/prometheus-adapter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Rules struct {
			Custom []struct {
				SeriesQuery string `json:"seriesQuery"`
				Resources   struct {
					Overrides map[string]struct {
						Resource string `json:"resource"`
					} `json:"overrides"`
				} `json:"resources"`
				Name struct {
					Matches string `json:"matches"`
					As      string `json:"as"`
				} `json:"name"`
				MetricsQuery string `json:"metricsQuery"`
			} `json:"custom"`
		} `json:"rules"`
	}
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("prometheus-adapter.yaml: %v", err)
	}
	r := v.Rules.Custom
	if len(r) != 1 || r[0].Name.As != metric || !strings.HasPrefix(r[0].SeriesQuery, metric+"{") ||
		r[0].Resources.Overrides["pod"].Resource != "pod" || r[0].Resources.Overrides["namespace"].Resource != "namespace" ||
		!strings.Contains(r[0].MetricsQuery, "<<.Series>>") {
		t.Fatalf("the adapter rule does not serve %s as a pods metric: %+v", metric, r)
	}
}

// checkServiceMonitor: the ServiceMonitor selects the headless metrics
// Service, scrapes /metrics on the admin port with the token from the
// Secret the pod reads it from, and that scrape succeeds against a proxy
// run from the ConfigMap.
func checkServiceMonitor(t *testing.T, o *objects, p *pod, r *running) {
	if len(o.serviceMonitors) != 1 {
		t.Fatalf("%d ServiceMonitors, want 1", len(o.serviceMonitors))
	}
	sm := o.serviceMonitors[0]
	var svc *corev1.Service
	for _, s := range o.services {
		if labelsMatch(sm.Spec.Selector.MatchLabels, s.Labels) {
			if svc != nil {
				t.Fatalf("the ServiceMonitor selects Services %s and %s", svc.Name, s.Name)
			}
			svc = s
		}
	}
	if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("the ServiceMonitor selects %v, want the headless metrics Service", svc)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("endpoints %+v", sm.Spec.Endpoints)
	}
	ep := sm.Spec.Endpoints[0]
	var target int32
	for _, sp := range svc.Spec.Ports {
		if sp.Name == ep.Port {
			target = sp.TargetPort.IntVal
		}
	}
	if target != port(t, "0.0.0.0", p.cfg.Admin.Addr) || ep.Path != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes %s on port %d, the admin listener is %s", ep.Path, target, p.cfg.Admin.Addr)
	}
	a := ep.Authorization
	if a == nil || a.Type != "Bearer" || a.Credentials == nil || a.Credentials.Name != p.secret {
		t.Fatalf("the ServiceMonitor's authorization %+v does not send the token of Secret %s", a, p.secret)
	}
	if s := o.secret(a.Credentials.Name); s == nil || string(s.Data[a.Credentials.Key]) != p.token {
		t.Fatalf("the ServiceMonitor sends key %s of Secret %s, not the token sluice reads", a.Credentials.Key, a.Credentials.Name)
	}
	code, body := r.get(t, r.admin+ep.Path, true)
	if code != 200 || !strings.Contains(body, "proxy_ready 1") {
		t.Errorf("a scrape with the ServiceMonitor's token: %d, proxy_ready 1 %v", code, strings.Contains(body, "proxy_ready 1"))
	}
}

// checkPrometheusRule: the PrometheusRule's groups are the rule file
// that promtool tests (deploy/prometheus/alerts.yml).
func checkPrometheusRule(t *testing.T, o *objects) {
	if len(o.rules) != 1 {
		t.Fatalf("%d PrometheusRules, want 1", len(o.rules))
	}
	b, err := os.ReadFile(root + "/" + AlertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var file monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(b, &file); err != nil {
		t.Fatalf("%s: %v", AlertsFile, err)
	}
	if !reflect.DeepEqual(o.rules[0].Spec, file) {
		t.Errorf("the PrometheusRule's groups differ from %s: run make manifests", AlertsFile)
	}
	alerts := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts++
			}
		}
	}
	if alerts < 10 {
		t.Errorf("%d alerts in the PrometheusRule", alerts)
	}
}

func port(t *testing.T, host, addr string) int32 {
	t.Helper()
	h, ps, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(ps)
	if err != nil || err2 != nil || h != host {
		t.Fatalf("address %q: want %s:PORT", addr, host)
	}
	return int32(n)
}

func resolve(p intstr.IntOrString, names map[string]int32) int32 {
	if p.Type == intstr.String {
		return names[p.StrVal]
	}
	return p.IntVal
}

func isTrue(b *bool) bool { return b != nil && *b }

// String makes a failing mode readable in -v output.
func (m mode) String() string { return fmt.Sprintf("%s (Kubernetes %s)", m.name, m.kube) }
