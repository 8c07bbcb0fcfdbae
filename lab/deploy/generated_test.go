// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedFilesCurrent: the plain manifests, the alert rules and the
// chart's copy of the dashboard are what `make manifests` writes from
// the chart now, and every plain manifest decodes strictly.
func TestGeneratedFilesCurrent(t *testing.T) {
	files, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Paths(files) {
		have, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || !bytes.Equal(have, files[p]) {
			t.Errorf("%s is not what the chart generates (%v): run make manifests", p, err)
		}
	}
	// deploy/kubernetes holds the generated manifests and their values
	// files, nothing hand-written that could go stale.
	entries, err := os.ReadDir(filepath.Join(root, "deploy/kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, p := range Plain {
		known[filepath.Base(p.Out)], known[filepath.Base(p.Values)] = true, true
	}
	for _, e := range entries {
		if !known[e.Name()] {
			t.Errorf("deploy/kubernetes/%s is neither a generated manifest nor its values file", e.Name())
		}
	}
	for _, p := range Plain {
		var ms []Manifest
		for i, doc := range strings.Split(string(files[p.Out]), "\n---\n") {
			if i > 0 {
				ms = append(ms, Manifest{Source: p.Out, Content: doc})
			}
		}
		o, err := decode(ms)
		if err != nil {
			t.Fatalf("%s: %v", p.Out, err)
		}
		if len(o.deployments) != 1 || len(o.services) != 1 || len(o.netpols) != 1 || len(o.secrets) != 0 {
			t.Errorf("%s: %d Deployments, %d Services, %d NetworkPolicies, %d Secrets: want one of each and no Secret (the token is the user's)",
				p.Out, len(o.deployments), len(o.services), len(o.netpols), len(o.secrets))
		}
	}
}
