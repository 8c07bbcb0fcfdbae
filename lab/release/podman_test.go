// SPDX-License-Identifier: Apache-2.0

package release

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
)

// podmanImage is what `podman image inspect` says of an image.
type podmanImage struct {
	ID           string `json:"Id"`
	Digest       string
	RepoTags     []string
	Architecture string
	Os           string
	Variant      string
	Config       struct {
		User         string
		Entrypoint   []string
		Cmd          []string
		ExposedPorts map[string]struct{}
		Labels       map[string]string
	}
}

// podman runs podman on a store of its own (vfs, under the test's
// temporary directory), so that the test neither sees nor changes the
// machine's images.
type podman struct {
	t     *testing.T
	store string
}

// global is podman's options for the test's store: images, run state
// and libpod's own state under it, no events logged.
func (p podman) global() []string {
	return []string{"--root", filepath.Join(p.store, "root"), "--runroot", filepath.Join(p.store, "run"), "--storage-driver", "vfs",
		"--tmpdir", filepath.Join(p.store, "tmp"), "--events-backend", "none"}
}

func (p podman) run(args ...string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append(p.global(), args...)
	start := time.Now()
	out, err := exec.CommandContext(ctx, "podman", full...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	p.t.Logf("podman %s: %v", args[0], time.Since(start).Round(time.Millisecond))
	return strings.TrimSpace(string(out))
}

func (p podman) inspect(ref string) podmanImage {
	p.t.Helper()
	var ims []podmanImage
	if err := json.Unmarshal([]byte(p.run("image", "inspect", ref)), &ims); err != nil || len(ims) != 1 {
		p.t.Fatalf("podman image inspect %s: %v, %d images", ref, err, len(ims))
	}
	return ims[0]
}

// TestImagePodman builds the multi-arch image with scripts/image.sh from
// the binaries scripts/build.sh makes, loads it with `podman load`,
// checks what podman says it declares (name, entrypoint, user, labels,
// both architectures), takes each architecture's /sluice out of the
// image's own layer as podman stores it, and serves the quick start
// through this machine's: a backend, `sluice proxy --listen 127.0.0.1:0
// --backend URL`, a request answered through it. (Running the container
// itself is not possible on these machines: container init may not set
// rlimits.) The version is one string throughout: scripts/version.sh's,
// `sluice version`'s, the image's label and tag.
//
// With SLUICE_IMAGE_ARCHES=native the image holds this machine's
// architecture alone: make test sets it, because cross-compiling
// everything for the other architecture would take a fresh CI machine
// minutes, and make release-check runs this test with both.
func TestImagePodman(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds sluice")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("SLUICE_REQUIRE_PODMAN") != "" {
			t.Fatal("podman is not installed: scripts/test-deps.sh installs it (apt-get install podman)")
		}
		t.Skip("podman is not installed (scripts/test-deps.sh installs it; SLUICE_REQUIRE_PODMAN=1 makes this a failure)")
	}
	s := testStamp(t)
	native, other := runtime.GOARCH, "arm64"
	if native == "arm64" {
		other = "amd64"
	}
	arches := Arches
	if os.Getenv("SLUICE_IMAGE_ARCHES") == "native" {
		arches, other = []string{native}, ""
	}
	bins := map[string]string{}
	for _, arch := range arches {
		bins[arch] = buildBinary(t, arch)
	}
	archive := filepath.Join(t.TempDir(), "sluice.oci.tar")
	start := time.Now()
	cmd := exec.Command(filepath.Join(root, "scripts/image.sh"))
	cmd.Env = s.env("BINDIR="+binDir, "OUT="+archive, "ARCHES="+strings.Join(arches, " "))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out)
	}
	t.Logf("scripts/image.sh %v: %v", arches, time.Since(start).Round(time.Millisecond))
	tag, err := Tag(s.version)
	if err != nil {
		t.Fatal(err)
	}
	ref := DefaultRepository + ":" + tag
	a, err := ReadImage(archive)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for arch, b := range bins {
		want[arch] = readFileFS(t, filepath.Dir(b), filepath.Base(b))
	}
	if err := CheckImageArches(a, s.version, want, arches); err != nil {
		t.Fatal(err)
	}

	p := podman{t, t.TempDir()}
	t.Cleanup(func() { _ = exec.Command("podman", append(p.global(), "rmi", "-a", "-f")...).Run() })
	if out := p.run("load", "-i", archive); !strings.Contains(out, "Loaded image: "+ref) && !strings.Contains(out, "Loaded image(s): "+ref) {
		t.Fatalf("podman load: %q, want the image loaded as %s", out, ref)
	}
	im := p.inspect(ref)
	checkPodmanImage(t, im, native, s)
	if !slices.Contains(im.RepoTags, ref) || im.Digest != a.Index.Digest {
		t.Errorf("podman has %s as %v, digest %s; want tag %s, digest %s (the image index's)", im.ID, im.RepoTags, im.Digest, ref, a.Index.Digest)
	}
	// The architectures, as podman reads the index.
	list := "localhost/sluice-release-test-platforms"
	p.run("manifest", "create", list)
	p.run("manifest", "add", "--all", list, "oci-archive:"+archive)
	var idx struct {
		Manifests []struct{ Platform PlatformSpec }
	}
	if err := json.Unmarshal([]byte(p.run("manifest", "inspect", list)), &idx); err != nil {
		t.Fatal(err)
	}
	var platforms, wantP []PlatformSpec
	for _, m := range idx.Manifests {
		platforms = append(platforms, m.Platform)
	}
	for _, arch := range arches {
		wantP = append(wantP, PlatformSpec{arch, "linux", variant(arch)})
	}
	if !slices.Equal(platforms, wantP) {
		t.Errorf("podman manifest inspect: platforms %+v, want %+v", platforms, wantP)
	}
	ids := map[string]string{native: im.ID}
	if other != "" {
		// The other architecture's image, as podman pulls it from the archive.
		ids[other] = p.run("pull", "-q", "--arch", other, "oci-archive:"+archive)
		checkPodmanImage(t, p.inspect(ids[other]), other, s)
	}

	// Each /sluice out of the image's own layer, as podman stores it.
	layerBins := map[string]string{}
	for arch, id := range ids {
		dir := p.run("image", "mount", id)
		b := readFileFS(t, dir, "sluice")
		if sha256Hex(b) != sha256Hex(want[arch]) {
			t.Errorf("linux/%s: /sluice in podman's image is not the binary scripts/build.sh made", arch)
		}
		layerBins[arch] = filepath.Join(t.TempDir(), "sluice")
		if err := os.WriteFile(layerBins[arch], b, 0o755); err != nil {
			t.Fatal(err)
		}
		p.run("image", "unmount", id)
	}
	if other != "" {
		binaryStrings(t, layerBins[other], other, s)
	}
	out, err := exec.Command(layerBins[native], "version").Output()
	if err != nil {
		t.Fatalf("sluice version: %v", err)
	}
	if wantV := (cli.BuildInfo{Version: s.version, Commit: s.commit, GoVersion: runtime.Version()}).String() + "\n"; string(out) != wantV {
		t.Errorf("sluice version from the image: %q, want %q", out, wantV)
	}
	serveQuickStart(t, layerBins[native])
}

// checkPodmanImage checks what podman says of one architecture's image.
func checkPodmanImage(t *testing.T, im podmanImage, arch string, s stamp) {
	t.Helper()
	c := im.Config
	created := ""
	if sec, err := strconv.ParseInt(s.epoch, 10, 64); err == nil {
		created = time.Unix(sec, 0).UTC().Format(time.RFC3339)
	}
	for _, chk := range []struct{ what, got, want string }{
		{"architecture", im.Architecture, arch}, {"os", im.Os, "linux"},
		{"user", c.User, "65532:65532"}, {"entrypoint", strings.Join(c.Entrypoint, " "), "/sluice"},
		{"cmd", strings.Join(c.Cmd, " "), "proxy --config /etc/sluice/sluice.yaml"},
		{"label version", c.Labels["org.opencontainers.image.version"], s.version},
		{"label revision", c.Labels["org.opencontainers.image.revision"], s.commit},
		{"label licenses", c.Labels["org.opencontainers.image.licenses"], "Apache-2.0"},
		{"label source", c.Labels["org.opencontainers.image.source"], "https://github.com/sluicehq/sluice"},
		{"label created", c.Labels["org.opencontainers.image.created"], created},
	} {
		if chk.got != chk.want {
			t.Errorf("linux/%s image %.12s: %s %q, want %q", arch, im.ID, chk.what, chk.got, chk.want)
		}
	}
	for _, port := range []string{"8080/tcp", "9901/tcp"} {
		if _, ok := c.ExposedPorts[port]; !ok {
			t.Errorf("linux/%s: port %s not exposed: %v", arch, port, c.ExposedPorts)
		}
	}
	// podman 4.3 does not say the variant in inspect (manifest inspect
	// does: TestImagePodman checks it there); a later one does.
	if im.Variant != "" && im.Variant != variant(arch) {
		t.Errorf("linux/%s: variant %q, want %q", arch, im.Variant, variant(arch))
	}
}

// reServing finds the addresses in the proxy's "sluice proxy serving"
// log line, in slog's text or JSON form.
var (
	reListen = regexp.MustCompile(`"?listen"?[=:]\["?([0-9.]+:[0-9]+)`)
	reAdmin  = regexp.MustCompile(`"?admin"?[=:]"?([0-9.]+:[0-9]+)`)
)

// serveQuickStart runs the quick start with the binary bin on loopback:
// `sluice proxy --listen 127.0.0.1:0 --admin 127.0.0.1:0 --backend URL`
// in front of a backend of the test; a request is answered through it,
// the admin's probes answer, and SIGTERM stops it with status 0.
func serveQuickStart(t *testing.T, bin string) {
	t.Helper()
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "from the backend: "+r.URL.Path)
	}))
	defer be.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, bin, "proxy", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--backend", be.URL)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	var listen, admin string
	var logs []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		logs = append(logs, sc.Text())
		if strings.Contains(sc.Text(), "sluice proxy serving") {
			if m := reListen.FindStringSubmatch(sc.Text()); m != nil {
				listen = m[1]
			}
			if m := reAdmin.FindStringSubmatch(sc.Text()); m != nil {
				admin = m[1]
			}
			break
		}
	}
	if listen == "" || admin == "" {
		t.Fatalf("no listening addresses in the proxy's log:\n%s", strings.Join(logs, "\n"))
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(url string) (int, string) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for {
		code, body := get("http://" + admin + "/readyz")
		if code == 200 && body == "ready\n" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("/readyz: %d %q", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := get("http://" + listen + "/quick/start"); code != 200 || body != "from the backend: /quick/start" {
		t.Errorf("GET /quick/start through sluice: %d %q", code, body)
	}
	if code, body := get("http://" + admin + "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("sluice proxy after SIGTERM: %v", err)
	}
	t.Logf("quick start through the image's binary: %v", time.Since(start).Round(time.Millisecond))
}
