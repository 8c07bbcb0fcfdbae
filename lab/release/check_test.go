// SPDX-License-Identifier: Apache-2.0

package release

import (
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// writeFile writes b to dir/name.
func writeFile(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantErr fails unless err is an error whose text holds every one of want.
func wantErr(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one with %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v, want an error with %q", what, err, w)
		}
	}
}

func TestCheckSums(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a", []byte("A"))
	writeFile(t, dir, "b", []byte("B"))
	sums := func(lines ...string) { writeFile(t, dir, SumsName, []byte(strings.Join(lines, "\n")+"\n")) }
	good := []string{sha256Hex([]byte("A")) + "  a", sha256Hex([]byte("B")) + "  b"}
	sums(good...)
	if err := checkSums(dir, []string{"a", "b"}); err != nil {
		t.Errorf("good sums: %v", err)
	}
	sums(good[0], sha256Hex([]byte("X"))+"  b")
	wantErr(t, "wrong digest", checkSums(dir, []string{"a", "b"}), "b has digest "+sha256Hex([]byte("B")))
	sums(good[0])
	wantErr(t, "a file left out", checkSums(dir, []string{"a", "b"}), "lists [a], want [a b]")
	sums(good[0], good[1], sha256Hex(nil)+"  c")
	wantErr(t, "a file that is not there", checkSums(dir, []string{"a", "b"}), "SHA256SUMS:3:", "want [a b]")
	sums(good[0], "nonsense")
	wantErr(t, "a bad line", checkSums(dir, []string{"a", "b"}), `SHA256SUMS:2: "nonsense" is not DIGEST  NAME`)
}

func TestCompare(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		writeFile(t, d, "same", []byte("1"))
		writeFile(t, d, "changed", []byte(d))
	}
	writeFile(t, a, "onlyA", nil)
	err := Compare(a, b)
	wantErr(t, "two different builds", err, "changed differs", "onlyA: only in "+a)
	if strings.Contains(err.Error(), "same") {
		t.Errorf("a file that is the same is reported: %v", err)
	}
	if err := Compare(a, a); err != nil {
		t.Errorf("a directory against itself: %v", err)
	}
	wantErr(t, "empty", Compare(t.TempDir(), t.TempDir()), "both empty")
}

// sbomOf writes the CycloneDX SBOM that cyclonedx-gomod's bin mode
// writes of the binary at path (the fields CheckSBOM reads), less the
// modules drop names, plus extra components.
func sbomOf(t *testing.T, path, version string, drop map[string]bool, extra ...bomComponent) string {
	t.Helper()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc bom
	doc.BOMFormat, doc.SpecVersion = "CycloneDX", "1.6"
	doc.Metadata.Component = bomComponent{Name: "github.com/sluicehq/sluice", Version: version}
	doc.Metadata.Properties = append(doc.Metadata.Properties, struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}{"cdx:gomod:binary:hash:SHA-256", sha256Hex(b)})
	for _, d := range bi.Deps {
		if drop[d.Path] {
			continue
		}
		h, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(d.Sum, "h1:"))
		if err != nil {
			t.Fatal(err)
		}
		c := bomComponent{Name: d.Path, Version: d.Version, PURL: fmt.Sprintf("pkg:golang/%s@%s?type=module", d.Path, d.Version)}
		c.Hashes = append(c.Hashes, struct {
			Alg     string `json:"alg"`
			Content string `json:"content"`
		}{"SHA-256", hex.EncodeToString(h)})
		doc.Components = append(doc.Components, c)
	}
	doc.Components = append(doc.Components, extra...)
	j, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sluice.cdx.json")
	writeFile(t, filepath.Dir(out), filepath.Base(out), j)
	return out
}

// TestCheckBinaryAndSBOM checks CheckBinary and CheckSBOM on a binary of
// scripts/build.sh: what it is passes, and each thing they look for,
// changed, is named.
func TestCheckBinaryAndSBOM(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds sluice")
	}
	s := testStamp(t)
	arch := runtime.GOARCH
	bin := buildBinary(t, arch)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckBinary(bin, b, arch, s.version, s.commit); err != nil {
		t.Errorf("the build's binary: %v", err)
	}
	wantErr(t, "another version", CheckBinary(bin, b, arch, "9.9.9", s.commit), "sluice version prints", `"sluice 9.9.9 (commit `)
	wantErr(t, "another commit", CheckBinary(bin, b, arch, s.version, "abc"), "(commit abc)")
	other := "arm64"
	if arch == other {
		other = "amd64"
	}
	wantErr(t, "another architecture", CheckBinary(bin, b, other, s.version, s.commit), "not "+other)

	if err := CheckSBOM(sbomOf(t, bin, s.version, nil), bin, s.version); err != nil {
		t.Errorf("an SBOM of the binary: %v", err)
	}
	wantErr(t, "another version", CheckSBOM(sbomOf(t, bin, "1.0.0", nil), bin, s.version), "describes github.com/sluicehq/sluice 1.0.0")
	wantErr(t, "a module left out", CheckSBOM(sbomOf(t, bin, s.version, map[string]bool{"github.com/spf13/cobra": true}), bin, s.version),
		"the binary holds github.com/spf13/cobra@")
	wantErr(t, "a module the binary lacks", CheckSBOM(sbomOf(t, bin, s.version, nil, bomComponent{Name: "example.com/x", Version: "v1.0.0"}), bin, s.version),
		"lists example.com/x@v1.0.0, which the binary does not hold")
	other = filepath.Join(t.TempDir(), "copy")
	writeFile(t, filepath.Dir(other), "copy", append(b, 0))
	wantErr(t, "another binary", CheckSBOM(sbomOf(t, bin, s.version, nil), other, s.version), "binary SHA-256")
}

// TestNotice holds the tree's NOTICE to the modules in a build of
// scripts/build.sh: every NOTICE file among them reproduced, no other.
func TestNotice(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds sluice")
	}
	bi, err := buildinfo.ReadFile(buildBinary(t, runtime.GOARCH))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	modcache := strings.TrimSpace(string(out))
	notice := readFileFS(t, root, "NOTICE")
	if err := CheckNotice(notice, bi, modcache); err != nil {
		t.Errorf("NOTICE and the binary's modules: %v", err)
	}
	const grpc = "-- google.golang.org/grpc --"
	i := strings.Index(string(notice), grpc)
	if i < 0 {
		t.Fatalf("NOTICE has no %s", grpc)
	}
	j := strings.Index(string(notice)[i+1:], "\n-- ")
	without := string(notice)[:i] + string(notice)[i+1+j+1:]
	wantErr(t, "a NOTICE without grpc's part", CheckNotice([]byte(without), bi, modcache), `no part "-- google.golang.org/grpc --"`)
	wantErr(t, "a part changed", CheckNotice([]byte(strings.Replace(string(notice), "Canonical Ltd.", "Someone", 1)), bi, modcache),
		"part for gopkg.in/yaml.v3 is not")
	wantErr(t, "a stale part", CheckNotice(append(notice, "\n-- example.com/gone --\n\nold\n"...), bi, modcache),
		"a part for example.com/gone, which the binary holds no NOTICE of")
}
