// SPDX-License-Identifier: Apache-2.0

// Command manifests writes what `make manifests` generates from the Helm
// chart deploy/helm/sluice (package deploy's Generate): the plain
// manifests of deploy/kubernetes, deploy/prometheus/alerts.yml and the
// chart's copy of the Grafana dashboard.
//
// Usage: manifests [ROOT]   (ROOT: the repository's root, default ../..)
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/lab/deploy"
)

func main() {
	root := "../.."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	files, err := deploy.Generate(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
	for _, p := range deploy.Paths(files) {
		if err := os.WriteFile(filepath.Join(root, p), files[p], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "manifests:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", p)
	}
}
