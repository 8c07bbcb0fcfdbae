// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// root is the repository's root, from this package's directory.
const root = "../.."

var chartOnce = sync.OnceValues(func() (*Chart, error) { return Load(root + "/" + ChartDir) })

// loadChart returns the chart, loaded once for every test.
func loadChart(t *testing.T) *Chart {
	t.Helper()
	c, err := chartOnce()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// objects holds every rendered object, decoded strictly into its API
// type (an unknown or misspelt field fails), by kind, in install order.
type objects struct {
	configMaps      []*corev1.ConfigMap
	secrets         []*corev1.Secret
	services        []*corev1.Service
	deployments     []*appsv1.Deployment
	pdbs            []*policyv1.PodDisruptionBudget
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	netpols         []*networkingv1.NetworkPolicy
	serviceMonitors []*monitoringv1.ServiceMonitor
	rules           []*monitoringv1.PrometheusRule
	notes           string
}

// render renders the chart with the values given as YAML for Kubernetes
// version kube, and decodes every object.
func render(t *testing.T, kube, values string) *objects {
	t.Helper()
	ms, notes, err := renderErr(t, kube, values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	o, err := decode(ms)
	if err != nil {
		t.Fatal(err)
	}
	o.notes = notes
	return o
}

func renderErr(t *testing.T, kube, values string) ([]Manifest, string, error) {
	t.Helper()
	var v map[string]any
	if err := yaml.UnmarshalStrict([]byte(values), &v); err != nil {
		t.Fatalf("the test's values: %v", err)
	}
	return loadChart(t).Render(Options{KubeVersion: kube, Values: v})
}

// decode decodes each manifest strictly into its API type.
func decode(ms []Manifest) (*objects, error) {
	var o objects
	for _, m := range ms {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(m.Content), &head); err != nil {
			return nil, fmt.Errorf("%s: %v", m.Source, err)
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "v1 ConfigMap":
			x := &corev1.ConfigMap{}
			o.configMaps, obj = append(o.configMaps, x), x
		case "v1 Secret":
			x := &corev1.Secret{}
			o.secrets, obj = append(o.secrets, x), x
		case "v1 Service":
			x := &corev1.Service{}
			o.services, obj = append(o.services, x), x
		case "apps/v1 Deployment":
			x := &appsv1.Deployment{}
			o.deployments, obj = append(o.deployments, x), x
		case "policy/v1 PodDisruptionBudget":
			x := &policyv1.PodDisruptionBudget{}
			o.pdbs, obj = append(o.pdbs, x), x
		case "autoscaling/v2 HorizontalPodAutoscaler":
			x := &autoscalingv2.HorizontalPodAutoscaler{}
			o.hpas, obj = append(o.hpas, x), x
		case "networking.k8s.io/v1 NetworkPolicy":
			x := &networkingv1.NetworkPolicy{}
			o.netpols, obj = append(o.netpols, x), x
		case "monitoring.coreos.com/v1 ServiceMonitor":
			x := &monitoringv1.ServiceMonitor{}
			o.serviceMonitors, obj = append(o.serviceMonitors, x), x
		case "monitoring.coreos.com/v1 PrometheusRule":
			x := &monitoringv1.PrometheusRule{}
			o.rules, obj = append(o.rules, x), x
		default:
			return nil, fmt.Errorf("%s: %s %s is not checked by these tests: add it", m.Source, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(m.Content), obj); err != nil {
			return nil, fmt.Errorf("%s (%s): %v", m.Source, head.Kind, err)
		}
	}
	return &o, nil
}

// TestStrictDecodingCatchesTypos: the decoder these tests rely on refuses
// a misspelt field, in the Kubernetes and the prometheus-operator types
// alike, so that a passing test means the fields exist.
func TestStrictDecodingCatchesTypos(t *testing.T) {
	for _, c := range []struct {
		doc string
		obj any
	}{
		{"apiVersion: apps/v1\nkind: Deployment\nspec:\n  replica: 2\n", &appsv1.Deployment{}},
		{"apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: a, restartPolicy: Always, lifecycle: {preStop: {slep: {seconds: 1}}}}]\n", &corev1.Pod{}},
		{"apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nspec:\n  endpoints: [{port: admin, authorisation: {type: Bearer}}]\n", &monitoringv1.ServiceMonitor{}},
		{"apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nspec:\n  groups: [{name: g, rules: [{alert: A, expression: up}]}]\n", &monitoringv1.PrometheusRule{}},
	} {
		if err := yaml.UnmarshalStrict([]byte(c.doc), c.obj); err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("a misspelt field decoded into %T: %v", c.obj, err)
		}
	}
}

func (o *objects) configMap(name string) *corev1.ConfigMap {
	for _, c := range o.configMaps {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (o *objects) secret(name string) *corev1.Secret {
	for _, s := range o.secrets {
		if s.Name == name {
			return s
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

func volume(pod corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}
