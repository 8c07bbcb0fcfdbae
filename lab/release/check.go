// SPDX-License-Identifier: Apache-2.0

package release

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Arches are the architectures a release is built for, each as
// linux/ARCH.
var Arches = []string{"amd64", "arm64"}

// The names of a release's files (scripts/release.sh).
const SumsName = "SHA256SUMS"

// BinaryName is the name of the release's binary for linux/arch.
func BinaryName(version, arch string) string { return "sluice-" + version + "-linux-" + arch }

// SBOMName is the name of the CycloneDX SBOM of that binary.
func SBOMName(version, arch string) string { return BinaryName(version, arch) + ".cdx.json" }

// ImageName is the name of the release's image archive.
func ImageName(version string) string { return "sluice-" + version + "-image.oci.tar" }

// Check checks the release of version in dir as scripts/release.sh
// writes it, and returns every problem it finds: SHA256SUMS lists exactly
// the release's files, with their digests; each binary is a static
// executable for its architecture, built with -trimpath and CGO off, with
// version set at link time; each SBOM describes its binary (CheckSBOM);
// the image is named by the version and holds the same binaries
// (CheckImage) with the release's LICENSE and NOTICE, the binaries print
// version and the image's revision label as their commit, and NOTICE
// holds the notices of what they hold (CheckNotice).
func Check(dir, version string) error {
	var errs []error
	want := []string{ImageName(version), "LICENSE", "NOTICE"}
	for _, arch := range Arches {
		want = append(want, BinaryName(version, arch), SBOMName(version, arch))
	}
	slices.Sort(want)
	if err := checkSums(dir, want); err != nil {
		errs = append(errs, err)
	}
	a, err := ReadImage(filepath.Join(dir, ImageName(version)))
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	commit := ""
	if len(a.Platforms) > 0 {
		commit = a.Platforms[0].Config.Config.Labels["org.opencontainers.image.revision"]
	}
	notice, err := os.ReadFile(filepath.Join(dir, "NOTICE"))
	if err != nil {
		errs = append(errs, err)
	}
	for _, doc := range []string{"LICENSE", "NOTICE"} {
		b, _ := os.ReadFile(filepath.Join(dir, doc))
		for _, p := range a.Platforms {
			if got, ok := p.Files[DocDir+doc]; !ok || len(b) == 0 || !bytes.Equal(got, b) {
				errs = append(errs, fmt.Errorf("image linux/%s: /%s%s is not the release's %s", p.Platform.Architecture, DocDir, doc, doc))
			}
		}
	}
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		errs = append(errs, fmt.Errorf("go env GOMODCACHE: %w", err))
	}
	bins := map[string][]byte{}
	for _, arch := range Arches {
		name := BinaryName(version, arch)
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		bins[arch] = b
		if bi, err := buildinfo.Read(bytes.NewReader(b)); err == nil && notice != nil {
			errs = append(errs, CheckNotice(notice, bi, strings.TrimSpace(string(modcache))))
		}
		errs = append(errs, CheckBinary(filepath.Join(dir, name), b, arch, version, commit),
			CheckSBOM(filepath.Join(dir, SBOMName(version, arch)), filepath.Join(dir, name), version))
	}
	return errors.Join(append(errs, CheckImage(a, version, bins))...)
}

// checkSums checks dir/SHA256SUMS: one "DIGEST  NAME" line per name of
// want (sorted), each digest the file's.
func checkSums(dir string, want []string) error {
	f, err := os.Open(filepath.Join(dir, SumsName))
	if err != nil {
		return err
	}
	defer f.Close()
	var errs []error
	var names []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			errs = append(errs, fmt.Errorf("%s:%d: %q is not DIGEST  NAME", SumsName, n, sc.Text()))
			continue
		}
		names = append(names, name)
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", SumsName, n, err))
			continue
		}
		if got := sha256Hex(b); got != sum {
			errs = append(errs, fmt.Errorf("%s:%d: %s has digest %s, not %s", SumsName, n, name, got, sum))
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	if !slices.Equal(names, want) {
		errs = append(errs, fmt.Errorf("%s lists %v, want %v", SumsName, names, want))
	}
	return errors.Join(errs...)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// CheckBinary checks that bin (read from path) is a static linux
// executable for arch, built as scripts/build.sh builds it (CGO off,
// -trimpath, no VCS stamp of the toolchain's), and that `sluice version`
// prints version and commit: it runs the binary, under qemu-user's
// emulator (qemu-aarch64, qemu-x86_64) when arch is not this machine's.
func CheckBinary(path string, bin []byte, arch, version, commit string) error {
	if err := checkBinary(path, bin, arch); err != nil {
		return err
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var errs []error
	for k, want := range map[string]string{"GOOS": "linux", "GOARCH": arch, "CGO_ENABLED": "0", "-trimpath": "true", "vcs": ""} {
		if settings[k] != want {
			errs = append(errs, fmt.Errorf("%s: build setting %s=%q, want %q", path, k, settings[k], want))
		}
	}
	if bi.Path != "github.com/sluicehq/sluice/cmd/sluice" {
		errs = append(errs, fmt.Errorf("%s: built from %s, not github.com/sluicehq/sluice/cmd/sluice", path, bi.Path))
	}
	out, err := RunVersion(path, arch)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if want := "sluice " + version + " (commit " + commit + ") " + bi.GoVersion + "\n"; out != want {
		errs = append(errs, fmt.Errorf("%s: sluice version prints %q, want %q", path, out, want))
	}
	return errors.Join(errs...)
}

// qemuArch is qemu-user's name of a GOARCH.
var qemuArch = map[string]string{"amd64": "x86_64", "arm64": "aarch64", "arm": "arm", "386": "i386",
	"ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"}

// RunVersion runs `sluice version` of the binary at path, built for
// arch, and returns what it prints: directly on a machine of arch, else
// under qemu-user's emulator (Debian's package qemu-user).
func RunVersion(path, arch string) (string, error) {
	cmd := exec.Command(path, "version")
	if arch != runtime.GOARCH {
		emu, err := exec.LookPath("qemu-" + qemuArch[arch])
		if err != nil {
			return "", fmt.Errorf("%s: running a linux/%s binary needs qemu-user (apt-get install qemu-user): %w", path, arch, err)
		}
		cmd = exec.Command(emu, path, "version")
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", path, err)
	}
	return string(out), nil
}

// CheckImage checks an image archive against version: its name is
// DefaultRepository:Tag(version); it holds one image per architecture of
// Arches, in that order, each running /sluice as 65532:65532 with the
// version, licence and source labels; and, for each architecture bins
// has, the image's /sluice is that binary; each has a LICENSE and a
// NOTICE in DocDir.
func CheckImage(a *Archive, version string, bins map[string][]byte) error {
	return CheckImageArches(a, version, bins, Arches)
}

// CheckImageArches is CheckImage for an image of the architectures
// arches, in that order (scripts/image.sh's ARCHES).
func CheckImageArches(a *Archive, version string, bins map[string][]byte, arches []string) error {
	var errs []error
	tag, err := Tag(version)
	if err != nil {
		return err
	}
	if a.Name != DefaultRepository+":"+tag || a.Tag != tag {
		errs = append(errs, fmt.Errorf("image named %q (tag %q), want %s:%s", a.Name, a.Tag, DefaultRepository, tag))
	}
	var got []string
	for _, p := range a.Platforms {
		got = append(got, p.Platform.Architecture)
		c := p.Config
		where := "image linux/" + p.Platform.Architecture
		if p.Platform.OS != "linux" || c.OS != "linux" || c.Architecture != p.Platform.Architecture || c.Variant != p.Platform.Variant {
			errs = append(errs, fmt.Errorf("%s: the index says %+v, the config %s/%s/%s", where, p.Platform, c.OS, c.Architecture, c.Variant))
		}
		for _, chk := range []struct{ what, got, want string }{
			{"user", c.Config.User, fmt.Sprintf("%d:%d", nonrootID, nonrootID)},
			{"entrypoint", strings.Join(c.Config.Entrypoint, " "), binaryPath},
			{"label org.opencontainers.image.version", c.Config.Labels["org.opencontainers.image.version"], version},
			{"label org.opencontainers.image.licenses", c.Config.Labels["org.opencontainers.image.licenses"], "Apache-2.0"},
			{"label org.opencontainers.image.source", c.Config.Labels["org.opencontainers.image.source"], "https://github.com/sluicehq/sluice"},
		} {
			if chk.got != chk.want {
				errs = append(errs, fmt.Errorf("%s: %s %q, want %q", where, chk.what, chk.got, chk.want))
			}
		}
		for _, doc := range []string{"LICENSE", "NOTICE"} {
			if len(p.Files[DocDir+doc]) == 0 {
				errs = append(errs, fmt.Errorf("%s: no /%s%s", where, DocDir, doc))
			}
		}
		if b, ok := bins[p.Platform.Architecture]; ok && !bytes.Equal(p.Files[binaryPath[1:]], b) {
			errs = append(errs, fmt.Errorf("%s: /sluice (sha256 %s) is not the release's binary (sha256 %s)", where,
				sha256Hex(p.Files[binaryPath[1:]]), sha256Hex(b)))
		}
	}
	if !slices.Equal(got, arches) {
		errs = append(errs, fmt.Errorf("image platforms %v, want %v", got, arches))
	}
	return errors.Join(errs...)
}

// Compare returns an error naming every file that differs between the
// release directories a and b, or that only one of them has: two builds
// of one commit must be the same, byte for byte.
func Compare(a, b string) error {
	list := func(dir string) (map[string][]byte, error) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		files := map[string][]byte{}
		for _, e := range ents {
			if files[e.Name()], err = os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
				return nil, err
			}
		}
		return files, nil
	}
	fa, err := list(a)
	if err != nil {
		return err
	}
	fb, err := list(b)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range sortedKeys(fa) {
		other, ok := fb[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: only in %s", name, a))
		case !bytes.Equal(fa[name], other):
			errs = append(errs, fmt.Errorf("%s differs: sha256 %s in %s, %s in %s", name, sha256Hex(fa[name]), a, sha256Hex(other), b))
		}
	}
	for _, name := range sortedKeys(fb) {
		if _, ok := fa[name]; !ok {
			errs = append(errs, fmt.Errorf("%s: only in %s", name, b))
		}
	}
	if len(fa) == 0 && len(fb) == 0 {
		errs = append(errs, fmt.Errorf("%s and %s are both empty", a, b))
	}
	return errors.Join(errs...)
}
