// SPDX-License-Identifier: Apache-2.0

// Package deploy renders sluice's Helm chart (deploy/helm/sluice) as
// `helm template` and `helm install` do, with Helm's own packages used as
// a library (helm.sh/helm/v4: the chart loader, the values with the
// chart's JSON schema, the template engine and the manifest sorter), so
// that the tests and `make manifests` need no helm binary and no cluster.
// The tests beside it decode every rendered object strictly into its
// Kubernetes API type and check what the objects name against a sluice
// proxy started from the chart's own ConfigMap.
package deploy

import (
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

// Options are what `helm template NAME CHART` takes besides the chart.
type Options struct {
	// Release is the release's name (helm template's NAME; default
	// "sluice").
	Release string
	// Namespace is the release's namespace (default "default").
	Namespace string
	// KubeVersion is the cluster's version, as --kube-version takes it
	// (e.g. "1.30.0"); empty: Helm's built-in default, as helm template
	// uses without a cluster (in a test binary Helm's default is 1.20,
	// which the chart refuses: tests give a version).
	KubeVersion string
	// Values are the user's values (-f files and --set merged), over the
	// chart's values.yaml.
	Values map[string]any
}

// Chart is a loaded chart.
type Chart struct{ c *chart.Chart }

// Load reads the chart in dir, as helm does (Chart.yaml validated).
func Load(dir string) (*Chart, error) {
	c, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	return &Chart{c}, nil
}

// Version is the chart's version; AppVersion the sluice release it runs.
func (c *Chart) Version() string    { return c.c.Metadata.Version }
func (c *Chart) AppVersion() string { return c.c.Metadata.AppVersion }

// Manifest is one rendered object's document, as helm prints it.
type Manifest struct {
	// Source is the template it came from, e.g. "sluice/templates/service.yaml".
	Source string
	// Content is the YAML document.
	Content string
}

// Render renders the chart with o as helm install would (the values
// checked against values.schema.json, the chart's kubeVersion against
// o.KubeVersion), and returns the objects in helm's install order and
// the rendered NOTES.txt. A template's fail, a schema violation or a
// YAML document that does not parse is an error.
func (c *Chart) Render(o Options) ([]Manifest, string, error) {
	if o.Release == "" {
		o.Release = "sluice"
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	caps := common.DefaultCapabilities.Copy()
	if o.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(o.KubeVersion)
		if err != nil {
			return nil, "", fmt.Errorf("kube version %q: %w", o.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	if kv := c.c.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return nil, "", fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", kv, caps.KubeVersion.String())
	}
	vals, err := util.ToRenderValues(c.c, o.Values, common.ReleaseOptions{
		Name: o.Release, Namespace: o.Namespace, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		return nil, "", err
	}
	files, err := engine.Render(c.c, vals)
	if err != nil {
		return nil, "", err
	}
	var notes string
	for name, content := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			notes = content
			delete(files, name)
		}
	}
	hooks, sorted, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, "", err
	}
	if len(hooks) > 0 {
		return nil, "", fmt.Errorf("the chart renders %d hooks; this renderer handles none", len(hooks))
	}
	out := make([]Manifest, len(sorted))
	for i, m := range sorted {
		out[i] = Manifest{Source: m.Name, Content: m.Content}
	}
	return out, notes, nil
}

// Text joins manifests as helm template prints them.
func Text(ms []Manifest) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Source, m.Content)
	}
	return b.String()
}
