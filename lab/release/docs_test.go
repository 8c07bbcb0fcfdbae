// SPDX-License-Identifier: Apache-2.0

package release

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/doccheck"
)

// The sections of docs/operations.md whose commands TestOperationsDocs
// runs, and what it changes in them to run them here: the release's
// address becomes a server on loopback, and the install needs no root.
var (
	docSections = []string{"Install", "Upgrade"}
	docRewrites = []struct{ from, to string }{
		{"https://github.com/sluicehq/sluice/releases/download", "{{server}}"},
		{"sudo ", ""},
		{"/usr/local/bin", "{{bindir}}"},
	}
	reDocVersion = regexp.MustCompile(`\bVERSION=([0-9][0-9A-Za-z.-]*)`)
	reDocArch    = regexp.MustCompile(`\bARCH=([a-z0-9]+)`)
)

// TestOperationsDocs runs every command of docs/operations.md's Install
// and Upgrade sections, as one shell script, against a release of the
// version they name served on loopback: the binary (scripts/build.sh),
// an SBOM of it, the image (scripts/image.sh, this machine's
// architecture) and SHA256SUMS; podman in a store of the test's own.
func TestOperationsDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds sluice")
	}
	for _, tool := range []string{"podman", "curl", "sha256sum", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("SLUICE_REQUIRE_PODMAN") != "" {
				t.Fatalf("%s is not installed (scripts/test-deps.sh installs podman)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	src, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	n := 0
	for _, b := range doccheck.CodeBlocks(string(src)) {
		in := false
		for _, s := range docSections {
			in = in || b.Under(s)
		}
		if !in {
			continue
		}
		if b.Lang != "sh" {
			t.Errorf("docs/operations.md:%d: a %q block in %v: the commands of these sections are sh blocks, and this test runs them", b.Line, b.Lang, b.Headings)
			continue
		}
		script.WriteString(b.Text)
		n++
	}
	if n < 3 {
		t.Fatalf("docs/operations.md: %d sh blocks under %v, want the binary's, the image's and the upgrade's", n, docSections)
	}
	text := script.String()
	vm, am := reDocVersion.FindStringSubmatch(text), reDocArch.FindStringSubmatch(text)
	if vm == nil || am == nil {
		t.Fatalf("the Install commands set no VERSION=X.Y.Z ARCH=A:\n%s", text)
	}
	version, arch := vm[1], am[1]
	if arch != runtime.GOARCH {
		t.Skipf("the docs install linux/%s, this machine is %s", arch, runtime.GOARCH)
	}

	// The release the commands download.
	s := testStamp(t)
	dir := t.TempDir()
	served := filepath.Join(dir, "v"+version)
	if err := os.Mkdir(served, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(served, BinaryName(version, arch))
	run := func(cmd *exec.Cmd) {
		t.Helper()
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd.Args[0], err, out)
		}
		t.Logf("%s: %v", filepath.Base(cmd.Args[0]), time.Since(start).Round(time.Millisecond))
	}
	build := exec.Command(filepath.Join(root, "scripts/build.sh"), arch, bin)
	build.Env = stamp{version, s.commit, s.epoch}.env()
	run(build)
	sbom, err := os.ReadFile(sbomOf(t, bin, version, nil))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, served, SBOMName(version, arch), sbom)
	image := exec.Command(filepath.Join(root, "scripts/image.sh"))
	image.Env = stamp{version, s.commit, s.epoch}.env("ARCHES="+arch, "BINDIR="+served, "OUT="+filepath.Join(served, ImageName(version)))
	run(image)
	var sums strings.Builder
	for _, name := range []string{ImageName(version), BinaryName(version, arch), SBOMName(version, arch)} {
		sums.WriteString(sha256Hex(readFileFS(t, served, name)) + "  " + name + "\n")
	}
	writeFile(t, served, SumsName, []byte(sums.String()))
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()

	// Where the commands run: the user's configuration beside them, a
	// bin directory on PATH, podman on a store and a state of the test's
	// own.
	work, bindir, store := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, work, "sluice.yaml", readFileFS(t, root, "examples/minimal.yaml"))
	conf := filepath.Join(store, "storage.conf")
	writeFile(t, store, "storage.conf", []byte(`[storage]
driver = "vfs"
graphroot = "`+filepath.Join(store, "root")+`"
runroot = "`+filepath.Join(store, "run")+`"
`))
	writeFile(t, store, "containers.conf", []byte(`[engine]
tmp_dir = "`+filepath.Join(store, "tmp")+`"
events_logger = "none"
`))
	env := append(os.Environ(), "PATH="+bindir+":"+os.Getenv("PATH"), "HOME="+work,
		"CONTAINERS_STORAGE_CONF="+conf, "CONTAINERS_CONF="+filepath.Join(store, "containers.conf"))
	t.Cleanup(func() {
		cmd := exec.Command("podman", "rmi", "-a", "-f")
		cmd.Env = env
		_ = cmd.Run()
	})
	for _, r := range docRewrites {
		if !strings.Contains(text, r.from) {
			t.Errorf("the commands no longer hold %q: update docRewrites", r.from)
		}
		to := strings.NewReplacer("{{server}}", srv.URL, "{{bindir}}", bindir).Replace(r.to)
		text = strings.ReplaceAll(text, r.from, to)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", text)
	cmd.Dir, cmd.Env = work, env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the commands of docs/operations.md: %v\n%s\n--- output:\n%s", err, text, out)
	}
	t.Logf("the commands of docs/operations.md: %v", time.Since(start).Round(time.Millisecond))
	for _, want := range []string{
		BinaryName(version, arch) + ": OK", SBOMName(version, arch) + ": OK", "SBOM: OK",
		"sluice " + version + " (commit " + s.commit + ") " + runtime.Version(),
		ImageName(version) + ": OK", "Loaded image: " + DefaultRepository + ":" + version,
		arch + " 65532:65532 " + version,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the commands' output lacks %q:\n%s", want, out)
		}
	}
	if got := strings.Count(string(out), "sluice "+version+" (commit "); got != 2 {
		t.Errorf("sluice version printed %d times, want 2 (installed, then before an upgrade):\n%s", got, out)
	}
}
