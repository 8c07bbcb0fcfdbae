// SPDX-License-Identifier: Apache-2.0

package release

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests build sluice with the release's own scripts, each binary
// once per run (buildBinary), into binDir.
var (
	root     string // the source tree: the product module's root
	binDir   string
	buildMu  sync.Mutex
	built    = map[string]string{} // GOARCH → binary
	stampErr error
	theStamp stamp
)

func TestMain(m *testing.M) {
	var err error
	if root, err = filepath.Abs("../.."); err == nil {
		binDir, err = os.MkdirTemp("", "sluice-release-test")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	theStamp, stampErr = stampOf(root)
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// stamp is what scripts/version.sh says the tree's builds carry.
type stamp struct{ version, commit, epoch string }

func stampOf(dir string) (stamp, error) {
	var s stamp
	for _, f := range []struct {
		what string
		to   *string
	}{{"version", &s.version}, {"commit", &s.commit}, {"epoch", &s.epoch}} {
		cmd := exec.Command(filepath.Join(dir, "scripts/version.sh"), f.what)
		cmd.Env = withoutStamp(os.Environ())
		out, err := cmd.Output()
		if err != nil {
			return s, fmt.Errorf("scripts/version.sh %s: %w", f.what, err)
		}
		*f.to = strings.TrimSpace(string(out))
	}
	return s, nil
}

// withoutStamp drops VERSION, COMMIT and SOURCE_DATE_EPOCH from env, so
// that the scripts derive them.
func withoutStamp(env []string) []string {
	var out []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != "VERSION" && k != "COMMIT" && k != "SOURCE_DATE_EPOCH" {
			out = append(out, kv)
		}
	}
	return out
}

// env is the environment the tests run the scripts in: the tree's stamp,
// computed once, so that a copy of the tree (which has no .git) builds
// the same.
func (s stamp) env(extra ...string) []string {
	return append(withoutStamp(os.Environ()), append([]string{"VERSION=" + s.version, "COMMIT=" + s.commit, "SOURCE_DATE_EPOCH=" + s.epoch}, extra...)...)
}

func testStamp(t *testing.T) stamp {
	t.Helper()
	if stampErr != nil {
		t.Fatal(stampErr)
	}
	return theStamp
}

// buildBinary returns the sluice binary for linux/arch as
// scripts/build.sh builds it from the tree, building it on first use.
func buildBinary(t *testing.T, arch string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := built[arch]; ok {
		return b
	}
	s := testStamp(t)
	out := filepath.Join(binDir, BinaryName(s.version, arch))
	start := time.Now()
	cmd := exec.Command(filepath.Join(root, "scripts/build.sh"), arch, out)
	cmd.Env = s.env()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build.sh %s: %v\n%s", arch, err, b)
	}
	t.Logf("scripts/build.sh %s: %v", arch, time.Since(start).Round(time.Millisecond))
	built[arch] = out
	return out
}

// copyTree copies the product module's files (Git's tracked and
// untracked-but-not-ignored files outside lab/) to a new directory.
func copyTree(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dst := filepath.Join(t.TempDir(), "another", "sluice-tree")
	n := 0
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if strings.HasPrefix(name, "lab/") {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, name))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n < 100 {
		t.Fatalf("copied %d files of the tree: git ls-files found too few", n)
	}
	return dst
}

// TestBuildReproducible builds linux/amd64 with scripts/build.sh twice:
// from the tree, and from a copy of it at another path, in another
// working directory, with GOFLAGS and GOAMD64 set to what would change the
// binary if the script let them through. The two must be the same bytes,
// hold neither tree's path, and be static.
func TestBuildReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds sluice")
	}
	s := testStamp(t)
	a := buildBinary(t, "amd64")
	tree := copyTree(t)
	b := filepath.Join(t.TempDir(), "sluice")
	cmd := exec.Command(filepath.Join(tree, "scripts/build.sh"), "amd64", b)
	cmd.Dir = t.TempDir()
	cmd.Env = s.env("GOFLAGS=-tags=netgo,osusergo", "GOAMD64=v3", "TMPDIR="+t.TempDir())
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/build.sh from %s: %v\n%s", tree, err, out)
	}
	t.Logf("the copy's build: %v", time.Since(start).Round(time.Millisecond))
	ab, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ab, bb) {
		at := 0
		for at < min(len(ab), len(bb)) && ab[at] == bb[at] {
			at++
		}
		t.Errorf("not reproducible: %d bytes (sha256 %s) from %s, %d bytes (sha256 %s) from %s; first difference at byte %d",
			len(ab), sha256Hex(ab), root, len(bb), sha256Hex(bb), tree, at)
	} else {
		t.Logf("linux/amd64: %d bytes, sha256 %s, twice", len(ab), sha256Hex(ab))
	}
	for _, dir := range []string{root, tree} {
		if bytes.Contains(ab, []byte(dir)) || bytes.Contains(bb, []byte(dir)) {
			t.Errorf("a binary holds the path %s", dir)
		}
	}
	if err := checkBinary(a, ab, "amd64"); err != nil {
		t.Error(err)
	}
}

// TestVersionScript runs scripts/version.sh in a repository of its own
// through the life of a release: no tag, a dirty tree, the release tag,
// a commit past it; and outside Git.
func TestVersionScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	script, err := os.ReadFile(filepath.Join(root, "scripts/version.sh"))
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "scripts/version.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(withoutStamp(os.Environ()), "GIT_CEILING_DIRECTORIES="+filepath.Dir(repo), "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_AUTHOR_DATE=2026-12-04T12:00:00Z", "GIT_COMMITTER_DATE=2026-12-04T12:00:00Z")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	version := func(what string, extra ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(repo, "scripts/version.sh"), what)
		cmd.Env = append(env, extra...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("version.sh %s: %v", what, err)
		}
		return strings.TrimSpace(string(out))
	}
	expect := func(when string, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %q, want %q", when, got, want)
		}
	}
	expect("outside Git", version("version"), "0.0.0-dev")
	expect("outside Git: commit", version("commit"), "")
	expect("outside Git: epoch", version("epoch"), "0")

	git("init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "one")
	rev := git("rev-parse", "HEAD")
	expect("no tag", version("version"), "0.0.0-dev+"+rev[:12])
	expect("commit", version("commit"), rev)
	expect("epoch", version("epoch"), "1796385600")

	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	expect("no tag, dirty", version("version"), "0.0.0-dev+"+rev[:12]+"-dirty")
	expect("dirty commit", version("commit"), rev+"-dirty")
	git("checkout", "-q", "f")

	git("tag", "-a", "v0.1.0", "-m", "sluice 0.1.0")
	expect("on the release tag", version("version"), "0.1.0")
	git("commit", "-q", "--allow-empty", "-m", "two")
	git("tag", "not-a-release")
	expect("past the tag", version("version"), "0.1.0-1-g"+git("rev-parse", "HEAD")[:12])
	expect("VERSION given", version("version", "VERSION=v2.0.0"), "2.0.0")
	expect("COMMIT given empty", version("commit", "COMMIT="), "")
	expect("SOURCE_DATE_EPOCH given", version("epoch", "SOURCE_DATE_EPOCH=5"), "5")
}

// binaryStrings checks that a binary that cannot run here (another
// architecture) is a static executable for arch built by
// scripts/build.sh, with version and commit linked in.
func binaryStrings(t *testing.T, path, arch string, s stamp) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBinary(path, b, arch); err != nil {
		t.Error(err)
	}
	bi, err := buildinfo.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range bi.Settings {
		if set.Key == "GOARCH" && set.Value != arch || set.Key == "CGO_ENABLED" && set.Value != "0" {
			t.Errorf("%s: build setting %s=%s", path, set.Key, set.Value)
		}
	}
	for _, want := range []string{s.version, s.commit} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s does not hold %q", path, want)
		}
	}
}

// readFileFS reads name below dir.
func readFileFS(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(os.DirFS(dir), name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
