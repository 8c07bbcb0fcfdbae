// SPDX-License-Identifier: Apache-2.0

package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	testVersion  = "0.0.0-dev+0123456789ab"
	testTag      = "0.0.0-dev_0123456789ab"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
)

// fakeELF writes a minimal ELF executable header for machine: enough for
// checkBinary and for the image's layout, which only copies the bytes
// (lab/release loads images of real binaries and runs them). interp adds
// a PT_INTERP program header, as a dynamically linked binary has.
func fakeELF(t *testing.T, machine elf.Machine, interp bool, body string) string {
	t.Helper()
	var b bytes.Buffer
	progs := []elf.Prog64{{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X)}}
	if interp {
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R)})
	}
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Phoff: 64, Ehsize: 64, Phentsize: 56, Phnum: uint16(len(progs))}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	if err := binary.Write(&b, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	if err := binary.Write(&b, binary.LittleEndian, progs); err != nil {
		t.Fatal(err)
	}
	b.WriteString(body)
	f := filepath.Join(t.TempDir(), "sluice-"+machine.String())
	if err := os.WriteFile(f, b.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
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

func testOptions(t *testing.T, out string) Options {
	return Options{
		// arm64 first: the index lists the platforms sorted all the same.
		Platforms: []Platform{{"arm64", fakeELF(t, elf.EM_AARCH64, false, "arm64 body")}, {"amd64", fakeELF(t, elf.EM_X86_64, false, "amd64 body")}},
		CACerts:   caBundle(t), Docs: []string{filepath.Join(root, "LICENSE"), filepath.Join(root, "NOTICE")},
		Repository: DefaultRepository, Version: testVersion, Revision: testRevision,
		Source: "https://github.com/sluicehq/sluice", Created: time.Unix(1700000000, 0).UTC(), Out: out}
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
		if hdrs[h.Name] != nil {
			t.Errorf("%s twice in the archive", h.Name)
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

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

// TestImageArchive checks the archive as an OCI image layout: every blob
// under its digest; index.json naming one image index by the repository
// and tag; that index listing linux/amd64 and linux/arm64; each
// platform's manifest, config and layer, with its own binary.
func TestImageArchive(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sluice.oci.tar")
	o := testOptions(t, out)
	res, err := BuildImage(o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ref != "ghcr.io/sluicehq/sluice:"+testTag {
		t.Errorf("ref %q", res.Ref)
	}
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
	var top Index
	mustJSON(t, files["index.json"], &top)
	if top.SchemaVersion != 2 || len(top.Manifests) != 1 || top.Manifests[0].Digest != res.Index.Digest {
		t.Fatalf("index.json: %+v (podman load takes an archive of exactly one image)", top)
	}
	if a := top.Manifests[0].Annotations; a[annotationRefName] != testTag || a[annotationImageName] != "ghcr.io/sluicehq/sluice:"+testTag {
		t.Errorf("index.json names the image %v", a)
	}
	var idx Index
	mustJSON(t, blob(top.Manifests[0], mediaIndex), &idx)
	if len(idx.Manifests) != 2 || len(res.Images) != 2 {
		t.Fatalf("image index: %d manifests, result %d images, want 2", len(idx.Manifests), len(res.Images))
	}
	bins := map[string]string{}
	for _, p := range o.Platforms {
		b, _ := os.ReadFile(p.Binary)
		bins[p.Arch] = string(b)
	}
	for i, want := range []PlatformSpec{{"amd64", "linux", ""}, {"arm64", "linux", "v8"}} {
		d := idx.Manifests[i]
		if d.Platform == nil || *d.Platform != want {
			t.Fatalf("manifest %d: platform %+v, want %+v", i, d.Platform, want)
		}
		if d.Digest != res.Images[i].Manifest.Digest || res.Images[i].Arch != want.Architecture {
			t.Errorf("result %+v and index %+v differ", res.Images[i], d)
		}
		var man Manifest
		mustJSON(t, blob(d, mediaManifest), &man)
		var cfg ImageConfig
		mustJSON(t, blob(man.Config, mediaConfig), &cfg)
		if len(man.Layers) != 1 {
			t.Fatalf("%s: %d layers, want 1", want.Architecture, len(man.Layers))
		}
		checkConfig(t, cfg, want)
		raw := gunzip(t, blob(man.Layers[0], mediaLayer))
		if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != sha(raw) {
			t.Fatalf("diff_ids %v, the layer's uncompressed digest is %s", cfg.RootFS.DiffIDs, sha(raw))
		}
		checkLayer(t, raw, bins[want.Architecture])
	}
}

// checkConfig checks one platform's image configuration.
func checkConfig(t *testing.T, cfg ImageConfig, p PlatformSpec) {
	t.Helper()
	c := cfg.Config
	for _, chk := range []struct{ what, got, want string }{
		{"os", cfg.OS, "linux"}, {"architecture", cfg.Architecture, p.Architecture}, {"variant", cfg.Variant, p.Variant},
		{"user", c.User, "65532:65532"}, {"entrypoint", strings.Join(c.Entrypoint, " "), "/sluice"},
		{"cmd", strings.Join(c.Cmd, " "), "proxy --config /etc/sluice/sluice.yaml"},
		{"version label", c.Labels["org.opencontainers.image.version"], testVersion},
		{"revision label", c.Labels["org.opencontainers.image.revision"], testRevision},
		{"source label", c.Labels["org.opencontainers.image.source"], "https://github.com/sluicehq/sluice"},
		{"licenses label", c.Labels["org.opencontainers.image.licenses"], "Apache-2.0"},
		{"created label", c.Labels["org.opencontainers.image.created"], "2023-11-14T22:13:20Z"},
		{"created", cfg.Created, "2023-11-14T22:13:20Z"},
		{"rootfs type", cfg.RootFS.Type, "layers"},
	} {
		if chk.got != chk.want {
			t.Errorf("%s %s: %q, want %q", p.Architecture, chk.what, chk.got, chk.want)
		}
	}
	for _, port := range []string{"8080/tcp", "9901/tcp"} {
		if _, ok := c.ExposedPorts[port]; !ok {
			t.Errorf("port %s not exposed: %v", port, c.ExposedPorts)
		}
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// checkLayer checks a layer's files: the binary given for its platform,
// the CA bundle, the user and /tmp.
func checkLayer(t *testing.T, raw []byte, bin string) {
	t.Helper()
	lf, lh := readTar(t, bytes.NewReader(raw))
	if h := lh["sluice"]; h == nil || h.Mode != 0o755 || h.Uid != 0 || string(lf["sluice"]) != bin {
		t.Fatalf("/sluice: %+v, not the platform's binary", h)
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
	for _, doc := range []string{"LICENSE", "NOTICE"} {
		want, _ := os.ReadFile(filepath.Join(root, doc))
		if h := lh[DocDir+doc]; h == nil || h.Mode != 0o644 || !bytes.Equal(lf[DocDir+doc], want) {
			t.Errorf("/%s%s: %+v, not the tree's", DocDir, doc, h)
		}
	}
	for _, d := range []string{"usr/", "usr/share/", "usr/share/doc/", DocDir, "etc/ssl/certs/", "home/nonroot/"} {
		if h := lh[d]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("directory /%s: %+v", d, h)
		}
	}
}

// TestImageReproducible: the same inputs give the same archive, byte for
// byte, whatever the order the platforms are given in; another created
// time gives another image.
func TestImageReproducible(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, filepath.Join(dir, "a.oci.tar"))
	a, err := BuildImage(o)
	if err != nil {
		t.Fatal(err)
	}
	o.Out = filepath.Join(dir, "b.oci.tar")
	o.Platforms[0], o.Platforms[1] = o.Platforms[1], o.Platforms[0]
	b, err := BuildImage(o)
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(filepath.Join(dir, "a.oci.tar"))
	bb, _ := os.ReadFile(filepath.Join(dir, "b.oci.tar"))
	if a.Index.Digest != b.Index.Digest || !bytes.Equal(ab, bb) {
		t.Errorf("not reproducible: index %s then %s, archives equal %v", a.Index.Digest, b.Index.Digest, bytes.Equal(ab, bb))
	}
	o.Out, o.Created = filepath.Join(dir, "c.oci.tar"), o.Created.Add(time.Second)
	if c, err := BuildImage(o); err != nil || c.Index.Digest == a.Index.Digest {
		t.Errorf("another created time: %v, index %s", err, c.Index.Digest)
	}
}

// TestImageRefusals: Build refuses what would not make a working image,
// saying why.
func TestImageRefusals(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"wrong machine", func(o *Options) { o.Platforms[0].Binary = fakeELF(t, elf.EM_X86_64, false, "") }, "is built for EM_X86_64, not arm64"},
		{"dynamic", func(o *Options) { o.Platforms[1].Binary = fakeELF(t, elf.EM_X86_64, true, "") }, "CGO_ENABLED=0"},
		{"not ELF", func(o *Options) { o.Platforms[1].Binary = caBundle(t) }, "is not an ELF binary"},
		{"unknown arch", func(o *Options) { o.Platforms[1].Arch = "vax" }, `architecture "vax"`},
		{"arch twice", func(o *Options) { o.Platforms[1].Arch = "arm64" }, "arm64 given twice"},
		{"no binary", func(o *Options) { o.Platforms = nil }, "no binary"},
		{"two docs of one name", func(o *Options) { o.Docs = append(o.Docs, caBundle(t), caBundle(t)) }, "two docs named"},
		{"bad tag", func(o *Options) { o.Version = "1.0/x" }, `version "1.0/x" does not make an image tag`},
		{"bad repository", func(o *Options) { o.Repository = "GHCR.io/Sluice" }, "is not an image name"},
	}
	for _, c := range cases {
		out := filepath.Join(t.TempDir(), "x.oci.tar")
		o := testOptions(t, out)
		c.mod(&o)
		_, err := BuildImage(o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Errorf("%s: an archive was written", c.name)
		}
	}
}

func TestTag(t *testing.T) {
	for v, want := range map[string]string{"0.1.0": "0.1.0", "0.1.0-3-g0123456789ab-dirty": "0.1.0-3-g0123456789ab-dirty",
		"0.0.0-dev+0123456789ab": "0.0.0-dev_0123456789ab", "": "", "+x": "_x", strings.Repeat("1", 129): ""} {
		got, err := Tag(v)
		if got != want && !(want == "" && err != nil) {
			t.Errorf("Tag(%q) = %q, %v; want %q", v, got, err, want)
		}
	}
}

// TestReadImage reads an archive back (what CheckImage and the podman
// test look at) and refuses one whose layer was changed after the fact.
func TestReadImage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sluice.oci.tar")
	o := testOptions(t, out)
	res, err := BuildImage(o)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ReadImage(out)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != res.Ref || a.Tag != testTag || a.Index.Digest != res.Index.Digest || len(a.Platforms) != 2 {
		t.Fatalf("read back %s (tag %s), index %s, %d platforms; built %s, index %s", a.Name, a.Tag, a.Index.Digest, len(a.Platforms), res.Ref, res.Index.Digest)
	}
	bins := map[string][]byte{}
	for _, p := range o.Platforms {
		bins[p.Arch], _ = os.ReadFile(p.Binary)
	}
	if err := CheckImage(a, testVersion, bins); err != nil {
		t.Errorf("CheckImage: %v", err)
	}
	if err := CheckImage(a, "0.2.0", nil); err == nil || !strings.Contains(err.Error(), "want ghcr.io/sluicehq/sluice:0.2.0") {
		t.Errorf("CheckImage of another version: %v", err)
	}
	bins["arm64"] = []byte("another binary")
	if err := CheckImage(a, testVersion, bins); err == nil || !strings.Contains(err.Error(), "image linux/arm64: /sluice") {
		t.Errorf("CheckImage with another arm64 binary: %v", err)
	}

	// The same archive with one byte of the amd64 layer changed.
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	files, hdrs := readTar(t, f)
	f.Close()
	layer := blobPath(res.Images[0].Layer.Digest)
	files[layer][len(files[layer])/2] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.oci.tar")
	g, err := os.Create(bad)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(g)
	for _, name := range sortedKeys(hdrs) {
		if err := tw.WriteHeader(hdrs[name]); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(files[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(tw.Close(), g.Close()); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadImage(bad); err == nil || !strings.Contains(err.Error(), "linux/amd64: layer 0") {
		t.Errorf("ReadImage of a changed layer: %v, want the amd64 layer named", err)
	}
}
