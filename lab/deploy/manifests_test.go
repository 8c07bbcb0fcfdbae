// Package deploy tests the Kubernetes manifests of deploy/kubernetes:
// every document decodes strictly into its k8s.io/api type (an unknown or
// misspelt field fails), and what they name — ports, probe paths, the
// config file, the metric the autoscaler scales on — is what a sluice
// proxy started from their own ConfigMap serves.
package deploy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/proxy"
)

const dir = "../../deploy/kubernetes"

// manifests holds every decoded object by kind, in file order.
type manifests struct {
	configMaps  []*corev1.ConfigMap
	secrets     []*corev1.Secret
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
}

// load decodes every document of every manifest strictly.
func load(t *testing.T) *manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	var m manifests
	docSep := regexp.MustCompile(`(?m)^---\s*$`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range docSep.Split(string(data), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			var obj any
			switch head.APIVersion + " " + head.Kind {
			case "v1 ConfigMap":
				o := &corev1.ConfigMap{}
				m.configMaps, obj = append(m.configMaps, o), o
			case "v1 Secret":
				o := &corev1.Secret{}
				m.secrets, obj = append(m.secrets, o), o
			case "apps/v1 Deployment":
				o := &appsv1.Deployment{}
				m.deployments, obj = append(m.deployments, o), o
			case "v1 Service":
				o := &corev1.Service{}
				m.services, obj = append(m.services, o), o
			case "policy/v1 PodDisruptionBudget":
				o := &policyv1.PodDisruptionBudget{}
				m.pdbs, obj = append(m.pdbs, o), o
			case "autoscaling/v2 HorizontalPodAutoscaler":
				o := &autoscalingv2.HorizontalPodAutoscaler{}
				m.hpas, obj = append(m.hpas, o), o
			default:
				t.Fatalf("%s, document %d: %s %s is not checked by this test: add it", f, i+1, head.APIVersion, head.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s, document %d (%s): %v", f, i+1, head.Kind, err)
			}
		}
	}
	return &m
}

func stripComments(doc string) string {
	var b strings.Builder
	for l := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestStrictDecodingCatchesTypos: the decoder this test relies on refuses
// a misspelt field, so that a passing test means the fields exist.
func TestStrictDecodingCatchesTypos(t *testing.T) {
	var d appsv1.Deployment
	err := yaml.UnmarshalStrict([]byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  replica: 2\n"), &d)
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
}

func TestManifests(t *testing.T) {
	m := load(t)
	if len(m.deployments) != 2 || len(m.hpas) != 1 || len(m.pdbs) == 0 {
		t.Fatalf("%d deployments, %d HPAs, %d PDBs: want the sidecar and the standalone deployment, an HPA and PDBs",
			len(m.deployments), len(m.hpas), len(m.pdbs))
	}
	for _, d := range m.deployments {
		t.Run(d.Name, func(t *testing.T) { checkDeployment(t, m, d) })
	}
	for _, p := range m.pdbs {
		if findDeployment(m, p.Spec.Selector.MatchLabels) == nil {
			t.Errorf("PodDisruptionBudget %s selects no deployment's pods", p.Name)
		}
	}
	h := m.hpas[0]
	if h.Spec.ScaleTargetRef.Kind != "Deployment" || deploymentNamed(m, h.Spec.ScaleTargetRef.Name) == nil {
		t.Errorf("the HPA scales %+v, not a deployment of these manifests", h.Spec.ScaleTargetRef)
	}
	if len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Pods == nil {
		t.Fatalf("the HPA's metrics: %+v, want one pods metric", h.Spec.Metrics)
	}
	metric := h.Spec.Metrics[0].Pods.Metric.Name
	// The adapter serves the metric under that name.
	var adapter *corev1.ConfigMap
	for _, c := range m.configMaps {
		if c.Name == "prometheus-adapter" {
			adapter = c
		}
	}
	if adapter == nil {
		t.Fatal("no prometheus-adapter ConfigMap")
	}
	var rules struct {
		Rules []struct {
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
		} `json:"rules"`
	}
	if err := yaml.UnmarshalStrict([]byte(adapter.Data["config.yaml"]), &rules); err != nil {
		t.Fatalf("prometheus-adapter config.yaml: %v", err)
	}
	if len(rules.Rules) != 1 || rules.Rules[0].Name.As != metric || !strings.HasPrefix(rules.Rules[0].SeriesQuery, metric+"{") ||
		rules.Rules[0].Resources.Overrides["pod"].Resource != "pod" {
		t.Fatalf("the adapter rule does not serve %s as a pods metric: %+v", metric, rules.Rules)
	}
	// And sluice exports it: the sidecar's proxy, run from its ConfigMap.
	cm := configMapNamed(m, volumeConfigMap(t, deploymentNamed(m, h.Spec.ScaleTargetRef.Name)))
	p := startFromConfigMap(t, m, cm)
	for range 20 {
		if _, err := http.Get(p.url + "/"); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.get(t, p.admin+"/metrics", 200), "\n"+metric+"{") {
		if time.Now().After(deadline) {
			t.Fatalf("/metrics has no %s", metric)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkDeployment checks one deployment's sluice container against its
// ConfigMap and a proxy run from it.
func checkDeployment(t *testing.T, m *manifests, d *appsv1.Deployment) {
	pod := d.Spec.Template.Spec
	var c *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == "sluice" {
			c = &pod.Containers[i]
		}
	}
	if c == nil {
		t.Fatal("no container named sluice")
	}
	// Runs as the image's non-root user, on a read-only root.
	sc := c.SecurityContext
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Errorf("security context: pod %+v, container %+v", pod.SecurityContext, sc)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources: %+v", c.Resources)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.MountPath] = vm
	}
	if vm, ok := mounts["/tmp"]; !ok || volume(pod, vm.Name).EmptyDir == nil {
		t.Errorf("/tmp is not an emptyDir: the root file system is read-only")
	}
	// The config file the container is given is the ConfigMap's key.
	if len(c.Args) != 3 || c.Args[0] != "proxy" || c.Args[1] != "--config" {
		t.Fatalf("args %q, want proxy --config FILE", c.Args)
	}
	dirPath, key := filepath.Split(c.Args[2])
	vm, ok := mounts[strings.TrimSuffix(dirPath, "/")]
	if !ok || vm.SubPath != "" {
		t.Fatalf("%s is not in a mounted directory (a subPath mount never sees ConfigMap updates)", c.Args[2])
	}
	cm := configMapNamed(m, volume(pod, vm.Name).ConfigMap.Name)
	if cm == nil || cm.Data[key] == "" {
		t.Fatalf("the ConfigMap of volume %s has no key %s", vm.Name, key)
	}
	cfg, err := proxy.Parse(key, []byte(withSecrets(t, m, pod, c, cm.Data[key])))
	if err != nil {
		t.Fatalf("the ConfigMap's %s: %v", key, err)
	}
	if cfg.WatchConfig <= 0 {
		t.Error("watch_config is off: a ConfigMap update would not be applied without a restart")
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= cfg.DrainTimeout {
		t.Errorf("terminationGracePeriodSeconds %v is not above drain_timeout %v", g, cfg.DrainTimeout)
	}
	// Ports: the container's, the probes', the Service's and the scrape
	// annotation's are the configuration's.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	port := func(addr string) int32 {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(p)
		return int32(n)
	}
	if ports["http"] != port(cfg.Listeners[0].Addr) || ports["admin"] != port(cfg.Admin.Addr) {
		t.Errorf("container ports %v, the configuration listens on %s and admin %s", ports, cfg.Listeners[0].Addr, cfg.Admin.Addr)
	}
	resolve := func(p intstr.IntOrString) int32 {
		if p.Type == intstr.String {
			return ports[p.StrVal]
		}
		return p.IntVal
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		t.Fatal("the sluice container needs HTTP liveness and readiness probes")
	}
	live, ready := c.LivenessProbe.HTTPGet, c.ReadinessProbe.HTTPGet
	if resolve(live.Port) != port(cfg.Admin.Addr) || resolve(ready.Port) != port(cfg.Admin.Addr) {
		t.Errorf("probes on ports %v and %v, the admin listener is %s", live.Port, ready.Port, cfg.Admin.Addr)
	}
	ann := d.Spec.Template.Annotations
	if ann["prometheus.io/port"] != strconv.Itoa(int(port(cfg.Admin.Addr))) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v, the admin listener is %s", ann, cfg.Admin.Addr)
	}
	svcOK := false
	for _, s := range m.services {
		if labelsMatch(s.Spec.Selector, d.Spec.Template.Labels) {
			for _, sp := range s.Spec.Ports {
				svcOK = svcOK || resolve(sp.TargetPort) == port(cfg.Listeners[0].Addr)
			}
		}
	}
	if !svcOK {
		t.Error("no Service sends its clients to sluice's listener")
	}
	// What the probes and the scrape ask for, a proxy run from this
	// ConfigMap serves.
	p := startFromConfigMap(t, m, cm)
	deadline := time.Now().Add(20 * time.Second)
	for p.status(t, p.admin+ready.Path) != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("readiness probe %s never answered 200", ready.Path)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if body := p.get(t, p.admin+live.Path, 200); body != "ok\n" {
		t.Errorf("liveness probe %s: %q", live.Path, body)
	}
	if !strings.Contains(p.get(t, p.admin+ann["prometheus.io/path"], 200), "proxy_ready 1") {
		t.Error("the scrape path does not serve proxy_ready")
	}
}

// withSecrets points the configuration's admin.token_file at a copy of
// the Secret's key that the container mounts there.
func withSecrets(t *testing.T, m *manifests, pod corev1.PodSpec, c *corev1.Container, text string) string {
	t.Helper()
	re := regexp.MustCompile(`token_file: (\S+)`)
	sm := re.FindStringSubmatch(text)
	if sm == nil {
		return text
	}
	dirPath, key := filepath.Split(sm[1])
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != strings.TrimSuffix(dirPath, "/") {
			continue
		}
		v := volume(pod, vm.Name)
		if v.Secret == nil {
			t.Fatalf("%s is not mounted from a Secret", sm[1])
		}
		for _, s := range m.secrets {
			if s.Name == v.Secret.SecretName && s.StringData[key] != "" {
				f := filepath.Join(t.TempDir(), key)
				if err := os.WriteFile(f, []byte(s.StringData[key]), 0o600); err != nil {
					t.Fatal(err)
				}
				return strings.Replace(text, sm[0], "token_file: "+f, 1)
			}
		}
		t.Fatalf("Secret %s has no key %s", v.Secret.SecretName, key)
	}
	t.Fatalf("%s is not on a mounted volume", sm[1])
	return ""
}

// running is a proxy started from a manifest's ConfigMap on loopback.
type running struct{ url, admin string }

// startFromConfigMap runs the ConfigMap's configuration with its
// addresses moved to free loopback ports and its servers to a local
// backend.
func startFromConfigMap(t *testing.T, m *manifests, cm *corev1.ConfigMap) *running {
	t.Helper()
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	t.Cleanup(be.Close)
	var pod corev1.PodSpec
	var c *corev1.Container
	for _, d := range m.deployments {
		if volumeConfigMap(t, d) == cm.Name {
			pod = d.Spec.Template.Spec
			for i := range pod.Containers {
				if pod.Containers[i].Name == "sluice" {
					c = &pod.Containers[i]
				}
			}
		}
	}
	text := withSecrets(t, m, pod, c, cm.Data["sluice.yaml"])
	text = regexp.MustCompile(`0\.0\.0\.0:\d+`).ReplaceAllString(text, "127.0.0.1:0")
	text = regexp.MustCompile(`url: http://\S+`).ReplaceAllString(text, "url: "+be.URL)
	text = strings.Replace(text, "request_buffer_dir: /tmp", "request_buffer_dir: "+t.TempDir(), 1)
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := proxy.LoadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(cfg, proxy.Options{ConfigFile: file, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &running{url: "http://" + srv.Addrs()[0].String(), admin: "http://" + srv.AdminAddr().String()}
}

var client = &http.Client{Timeout: 10 * time.Second}

func (p *running) status(t *testing.T, url string) int {
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (p *running) get(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = io.Copy(&b, resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b.String())
	}
	return b.String()
}

func volume(pod corev1.PodSpec, name string) corev1.Volume {
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	panic(fmt.Sprintf("no volume %q", name))
}

// volumeConfigMap is the ConfigMap of the sluice container's config file.
func volumeConfigMap(t *testing.T, d *appsv1.Deployment) string {
	pod := d.Spec.Template.Spec
	for _, c := range pod.Containers {
		if c.Name != "sluice" || len(c.Args) < 3 {
			continue
		}
		dirPath, _ := filepath.Split(c.Args[2])
		for _, vm := range c.VolumeMounts {
			if vm.MountPath == strings.TrimSuffix(dirPath, "/") && volume(pod, vm.Name).ConfigMap != nil {
				return volume(pod, vm.Name).ConfigMap.Name
			}
		}
	}
	t.Fatalf("deployment %s: no sluice config volume", d.Name)
	return ""
}

func configMapNamed(m *manifests, name string) *corev1.ConfigMap {
	for _, c := range m.configMaps {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func deploymentNamed(m *manifests, name string) *appsv1.Deployment {
	for _, d := range m.deployments {
		if d.Name == name {
			return d
		}
	}
	return nil
}

func findDeployment(m *manifests, sel map[string]string) *appsv1.Deployment {
	for _, d := range m.deployments {
		if labelsMatch(sel, d.Spec.Template.Labels) {
			return d
		}
	}
	return nil
}

// labelsMatch reports whether every selector label is among labels.
func labelsMatch(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
