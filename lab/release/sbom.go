// SPDX-License-Identifier: Apache-2.0

package release

import (
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// bom is the part of a CycloneDX JSON document CheckSBOM reads
// (https://cyclonedx.org/docs/1.6/json/).
type bom struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component  bomComponent `json:"component"`
		Properties []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"properties"`
	} `json:"metadata"`
	Components []bomComponent `json:"components"`
}

type bomComponent struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
	Hashes  []struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	} `json:"hashes"`
}

// CheckSBOM checks the CycloneDX SBOM at path against the binary at
// binPath: it describes github.com/sluicehq/sluice at version, names the
// binary by its SHA-256, and lists exactly the modules the binary records
// (path and version), each with the SHA-256 of its go.sum hash.
func CheckSBOM(path, binPath, version string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc bom
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return err
	}
	bi, err := buildinfo.ReadFile(binPath)
	if err != nil {
		return fmt.Errorf("%s: %w", binPath, err)
	}
	var errs []error
	if doc.BOMFormat != "CycloneDX" || !strings.HasPrefix(doc.SpecVersion, "1.") {
		errs = append(errs, fmt.Errorf("%s: bomFormat %q spec %q, want CycloneDX 1.x", path, doc.BOMFormat, doc.SpecVersion))
	}
	if m := doc.Metadata.Component; m.Name != "github.com/sluicehq/sluice" || m.Version != version {
		errs = append(errs, fmt.Errorf("%s: describes %s %s, want github.com/sluicehq/sluice %s", path, m.Name, m.Version, version))
	}
	binHash := ""
	for _, p := range doc.Metadata.Properties {
		if strings.HasSuffix(p.Name, "binary:hash:SHA-256") {
			binHash = p.Value
		}
	}
	if want := sha256Hex(bin); binHash != want {
		errs = append(errs, fmt.Errorf("%s: binary SHA-256 %q, %s has %s", path, binHash, binPath, want))
	}
	want := map[string]string{} // path@version → hex SHA-256 of the h1: sum
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		h, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(m.Sum, "h1:"))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: module %s@%s: sum %q: %w", binPath, m.Path, m.Version, m.Sum, err))
		}
		want[m.Path+"@"+m.Version] = hex.EncodeToString(h)
	}
	got := map[string]string{}
	for _, c := range doc.Components {
		for _, h := range c.Hashes {
			if h.Alg == "SHA-256" {
				got[c.Name+"@"+c.Version] = h.Content
			}
		}
		if _, ok := got[c.Name+"@"+c.Version]; !ok {
			got[c.Name+"@"+c.Version] = ""
		}
	}
	for _, k := range sortedKeys(want) {
		if h, ok := got[k]; !ok {
			errs = append(errs, fmt.Errorf("%s: the binary holds %s, the SBOM does not list it", path, k))
		} else if h != want[k] {
			errs = append(errs, fmt.Errorf("%s: %s has SHA-256 %q, the binary's go.sum hash is %s", path, k, h, want[k]))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			errs = append(errs, fmt.Errorf("%s: lists %s, which the binary does not hold", path, k))
		}
	}
	if len(want) == 0 {
		errs = append(errs, fmt.Errorf("%s records no modules", binPath))
	}
	return errors.Join(errs...)
}

// SBOMComponents returns the name@version of every component of the
// CycloneDX SBOM at path, sorted.
func SBOMComponents(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc bom
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []string
	for _, c := range doc.Components {
		out = append(out, c.Name+"@"+c.Version)
	}
	slices.Sort(out)
	return out, nil
}
