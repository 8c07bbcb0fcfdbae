package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testVersion  = "v0.0.0-imagetest"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// sluiceBinary builds the static sluice binary once per test run, as
// scripts/image.sh does.
func sluiceBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ociimage-test")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "sluice")
		pkg := "github.com/sluicehq/sluice/internal/cli"
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags",
			"-s -w -X "+pkg+".version="+testVersion+" -X "+pkg+".commit="+testRevision, "-o", binPath, "./cmd/sluice")
		cmd.Dir = "../../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// caBundle is a CA file: the system's when present, else a stand-in (the
// image only copies it).
func caBundle(t *testing.T) string {
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		return "/etc/ssl/certs/ca-certificates.crt"
	}
	f := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(f, []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func buildTestImage(t *testing.T, out string) Result {
	t.Helper()
	r, err := Build(Options{Binary: sluiceBinary(t), CACerts: caBundle(t), Name: "sluice", Version: testVersion, Revision: testRevision,
		Source: "https://github.com/sluicehq/sluice", Arch: "amd64", Created: time.Unix(1700000000, 0).UTC(), Out: out})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readTar returns the regular files of a tar stream by name, and the
// headers of every entry.
func readTar(t *testing.T, r io.Reader) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files, hdrs := map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// TestImageArchive checks the archive as an OCI image layout: every blob
// under its digest, the index, the manifest, the config and the layer;
// then runs the binary from the layer.
func TestImageArchive(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sluice.oci.tar")
	res := buildTestImage(t, out)
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files, _ := readTar(t, f)
	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout: %q", got)
	}
	for name, b := range files {
		if d, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && sha(b) != "sha256:"+d {
			t.Errorf("blob %s has digest %s", name, sha(b))
		}
	}
	blob := func(d Descriptor, media string) []byte {
		t.Helper()
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
		if !ok || int64(len(b)) != d.Size || d.MediaType != media {
			t.Fatalf("descriptor %+v: blob present %v, size %d, want media type %s", d, ok, len(b), media)
		}
		return b
	}
	var idx Index
	mustJSON(t, files["index.json"], &idx)
	if idx.SchemaVersion != 2 || len(idx.Manifests) != 1 || idx.Manifests[0].Digest != res.Manifest.Digest {
		t.Fatalf("index.json: %+v", idx)
	}
	if ref := idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; ref != "sluice:"+testVersion {
		t.Errorf("ref name %q", ref)
	}
	var man Manifest
	mustJSON(t, blob(idx.Manifests[0], mediaManifest), &man)
	var cfg ImageConfig
	mustJSON(t, blob(man.Config, mediaConfig), &cfg)
	if len(man.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(man.Layers))
	}
	layer := blob(man.Layers[0], mediaLayer)

	c := cfg.Config
	for _, chk := range []struct{ what, got, want string }{
		{"os", cfg.OS, "linux"}, {"architecture", cfg.Architecture, "amd64"},
		{"user", c.User, "65532:65532"}, {"entrypoint", strings.Join(c.Entrypoint, " "), "/sluice"},
		{"cmd", strings.Join(c.Cmd, " "), "proxy --config /etc/sluice/sluice.yaml"},
		{"version label", c.Labels["org.opencontainers.image.version"], testVersion},
		{"revision label", c.Labels["org.opencontainers.image.revision"], testRevision},
		{"source label", c.Labels["org.opencontainers.image.source"], "https://github.com/sluicehq/sluice"},
		{"licenses label", c.Labels["org.opencontainers.image.licenses"], "Apache-2.0"},
		{"rootfs type", cfg.RootFS.Type, "layers"},
	} {
		if chk.got != chk.want {
			t.Errorf("%s: %q, want %q", chk.what, chk.got, chk.want)
		}
	}
	for _, p := range []string{"8080/tcp", "9901/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed: %v", p, c.ExposedPorts)
		}
	}

	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != sha(raw) {
		t.Fatalf("diff_ids %v, the layer's uncompressed digest is %s", cfg.RootFS.DiffIDs, sha(raw))
	}
	lf, lh := readTar(t, bytes.NewReader(raw))
	if h := lh["sluice"]; h == nil || h.Mode != 0o755 || h.Uid != 0 {
		t.Fatalf("/sluice: %+v", h)
	}
	if h := lh["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v", h)
	}
	ca, _ := os.ReadFile(caBundle(t))
	if !bytes.Equal(lf["etc/ssl/certs/ca-certificates.crt"], ca) {
		t.Error("the CA bundle in the layer differs from the input")
	}
	if !strings.Contains(string(lf["etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(lf["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("user nonroot missing:\n%s\n%s", lf["etc/passwd"], lf["etc/group"])
	}
	// The binary in the layer is the one that was given, and it runs.
	bin := filepath.Join(t.TempDir(), "sluice")
	if err := os.WriteFile(bin, lf["sluice"], 0o755); err != nil {
		t.Fatal(err)
	}
	outb, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("sluice version from the layer: %v\n%s", err, outb)
	}
	if want := "sluice " + testVersion + " (commit " + testRevision + ")"; !strings.HasPrefix(string(outb), want) {
		t.Fatalf("sluice version: %q, want prefix %q", outb, want)
	}
	t.Logf("image %s: archive %d bytes, layer %d bytes gzip'd, %d uncompressed", res.Manifest.Digest, res.ArchiveSize, res.LayerSize, res.Uncompressed)

	// The same inputs give the same image.
	if again := buildTestImage(t, filepath.Join(t.TempDir(), "again.oci.tar")); again.Manifest.Digest != res.Manifest.Digest {
		t.Errorf("not reproducible: %s then %s", res.Manifest.Digest, again.Manifest.Digest)
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

// TestImageRunsInPodman loads the archive into podman, runs the proxy in
// it on the host's loopback in front of a backend of this test, and gets
// /healthz, /readyz and a proxied answer through it. It runs when podman
// is installed, and installs it first when SLUICE_REQUIRE_PODMAN is set.
func TestImageRunsInPodman(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("SLUICE_REQUIRE_PODMAN") == "" {
			t.Skip("podman is not installed (SLUICE_REQUIRE_PODMAN=1 installs it with apt-get)")
		}
		for _, args := range [][]string{{"update"}, {"install", "-y", "podman", "runc"}} {
			cmd := exec.Command("apt-get", args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("apt-get %v: %v\n%s", args, err, tail(out))
			}
		}
	}
	out := filepath.Join(t.TempDir(), "sluice.oci.tar")
	buildTestImage(t, out)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	loaded, err := exec.CommandContext(ctx, "podman", "load", "-q", "-i", out).CombinedOutput()
	if err != nil {
		t.Fatalf("podman load: %v\n%s", err, loaded)
	}
	image := "localhost/sluice:" + testVersion
	t.Cleanup(func() { _ = exec.Command("podman", "rmi", "-f", image).Run() })

	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "from the backend") }))
	defer be.Close()
	listen, admin := freePort(t), freePort(t)
	name := "sluice-imagetest-" + strconv.Itoa(os.Getpid())
	args := []string{"run", "-d", "--rm", "--name", name, "--network", "host"}
	// Modest limits: podman's defaults (nofile 1048576, nproc 4194304)
	// are above what a sandbox may let the runtime set, and so were this
	// process's own in one (setrlimit: operation not permitted); 4096
	// is plenty for this test.
	args = append(args, "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096")
	args = append(args, image, "proxy", "--listen", listen, "--backend", be.URL, "--admin", admin)
	run := func(runtime ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "podman", append(runtime, args...)...).CombinedOutput()
	}
	msg, err := run()
	if err != nil && strings.Contains(string(msg), "hybrid mode") {
		// crun refuses a host with cgroup v1 controllers beside v2 (this
		// sandbox's); runc runs there.
		if _, lerr := exec.LookPath("runc"); lerr == nil {
			msg, err = run("--runtime", "runc")
		}
	}
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_PODMAN") != "" {
			t.Fatalf("podman run: %v\n%s", err, msg)
		}
		t.Skipf("podman cannot run containers here: %v: %s", err, strings.TrimSpace(string(msg)))
	}
	t.Cleanup(func() { _ = exec.Command("podman", "rm", "-f", name).Run() })

	client := &http.Client{Timeout: 5 * time.Second}
	getBody := func(url string) (int, string, error) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		code, body, err := getBody("http://" + admin + "/readyz")
		if err == nil && code == 200 && body == "ready\n" {
			break
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command("podman", "logs", name).CombinedOutput()
			t.Fatalf("/readyz through the container: %d %q %v\n%s", code, body, err, tail(logs))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body, err := getBody("http://" + admin + "/healthz"); err != nil || code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q %v", code, body, err)
	}
	if code, body, err := getBody("http://" + listen + "/"); err != nil || code != 200 || body != "from the backend" {
		t.Fatalf("proxied GET /: %d %q %v", code, body, err)
	}
	if v, err := exec.Command("podman", "exec", name, "/sluice", "version").CombinedOutput(); err != nil || !strings.Contains(string(v), testRevision) {
		t.Fatalf("sluice version in the container: %v %s", err, v)
	}
	if u, err := exec.Command("podman", "exec", name, "/sluice", "version").CombinedOutput(); err == nil {
		t.Logf("in the container: %s", strings.TrimSpace(string(u)))
	}
}

// freePort returns a loopback address with a port free at the time.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
