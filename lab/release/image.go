// SPDX-License-Identifier: Apache-2.0

// Package release makes and checks what a release of sluice ships: the
// multi-architecture container image (BuildImage, which lab/cmd/ociimage
// runs for scripts/image.sh), and the release directory that
// scripts/release.sh writes, checked by Check and, for reproducibility,
// Compare (lab/cmd/releasecheck, make release-check). Its tests build
// with the scripts themselves: one target twice from two copies of the
// tree, and the image loaded into podman and served from.
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// DefaultRepository is the image's repository: the chart's and the
// manifests' default image is DefaultRepository:VERSION.
const DefaultRepository = "ghcr.io/sluicehq/sluice"

// Platform is one image of the index: a static sluice binary for Arch.
type Platform struct {
	Arch   string // GOARCH: amd64, arm64
	Binary string // the static sluice binary (linux, CGO_ENABLED=0)
}

// Options are what an image is built from.
type Options struct {
	Platforms  []Platform // at least one, each architecture once
	CACerts    string     // the CA bundle (Debian's ca-certificates)
	Docs       []string   // files for DocDir: LICENSE, NOTICE
	Repository string     // the image's name without its tag (DefaultRepository)
	Version    string     // org.opencontainers.image.version; the tag is Tag(Version)
	Revision   string     // org.opencontainers.image.revision
	Source     string     // org.opencontainers.image.source
	Created    time.Time  // every timestamp in the image
	Out        string     // the archive to write
}

// Media types of the OCI image specification (image-spec v1.1).
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Annotations that name the image in index.json: the OCI layout's own
// (the tag alone, as `skopeo copy oci-archive:FILE:TAG` selects it) and
// containerd's (the full reference, which podman load and docker load
// give the image they load).
const (
	annotationRefName   = "org.opencontainers.image.ref.name"
	annotationImageName = "io.containerd.image.name"
)

// Image settings.
const (
	// UID and GID of the image's user, "nonroot" (distroless's number).
	nonrootID = 65532
	// Where the binary and the configuration live in the image.
	binaryPath = "/sluice"
	configDir  = "/etc/sluice"
	caPath     = "etc/ssl/certs/ca-certificates.crt"
	// DocDir is where the image holds its licence and notices, as Debian
	// puts a package's.
	DocDir = "usr/share/doc/sluice/"
)

// PlatformSpec is the platform of a manifest in an image index.
type PlatformSpec struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *PlatformSpec     `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Index is an image index: index.json, and the index of the platforms'
// images it points to.
type Index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []Descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// Manifest is an image manifest.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// History is one entry of an image's history.
type History struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// ImageConfig is the image configuration (the runtime's part in Config).
type ImageConfig struct {
	Created      string    `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Variant      string    `json:"variant,omitempty"`
	Config       RunConfig `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []History `json:"history"`
}

// RunConfig is how the container runs.
type RunConfig struct {
	User         string              `json:"User"`
	Entrypoint   []string            `json:"Entrypoint"`
	Cmd          []string            `json:"Cmd"`
	Env          []string            `json:"Env"`
	WorkingDir   string              `json:"WorkingDir"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts"`
	Labels       map[string]string   `json:"Labels"`
}

// Result describes a built archive.
type Result struct {
	Ref         string     // REPOSITORY:TAG, the name podman load gives it
	Index       Descriptor // the image index: its digest is the one a registry shows for the tag
	Images      []Image    // per platform, by architecture
	ArchiveSize int64
}

// Image describes one platform's image.
type Image struct {
	Arch         string
	Manifest     Descriptor
	ConfigDigest string
	Layer        Descriptor
	LayerSize    int64 // compressed
	Uncompressed int64 // the layer's tar
}

// blob is a file of the layout's blobs/sha256/.
type blob struct {
	digest string
	data   []byte
}

// BuildImage writes the image described by o and returns what it wrote.
func BuildImage(o Options) (Result, error) {
	var r Result
	if err := o.validate(); err != nil {
		return r, err
	}
	ca, err := os.ReadFile(o.CACerts)
	if err != nil {
		return r, fmt.Errorf("CA certificates: %w (apt-get install ca-certificates)", err)
	}
	files := []layerFile{{caPath, 0o644, ca}}
	for _, d := range o.Docs {
		b, err := os.ReadFile(d)
		if err != nil {
			return r, err
		}
		files = append(files, layerFile{DocDir + filepath.Base(d), 0o644, b})
	}
	tag, _ := Tag(o.Version) // checked by validate
	r.Ref = o.Repository + ":" + tag
	labels := o.labels()
	platforms := slices.Clone(o.Platforms)
	slices.SortFunc(platforms, func(a, b Platform) int { return strings.Compare(a.Arch, b.Arch) })
	var blobs []blob
	var manifests []Descriptor
	for _, p := range platforms {
		im, desc, bs, err := buildImage(o, p, files, labels)
		if err != nil {
			return r, err
		}
		r.Images = append(r.Images, im)
		manifests = append(manifests, desc)
		blobs = append(blobs, bs...)
	}
	inner, err := json.Marshal(Index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: manifests, Annotations: labels})
	if err != nil {
		return r, err
	}
	r.Index = describe(mediaIndex, inner)
	blobs = append(blobs, blob{r.Index.Digest, inner})
	top := r.Index
	top.Annotations = map[string]string{annotationRefName: tag, annotationImageName: r.Ref}
	idx, err := json.Marshal(Index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []Descriptor{top}})
	if err != nil {
		return r, err
	}
	r.ArchiveSize, err = writeArchive(o.Out, o.Created, idx, blobs)
	return r, err
}

// labels are the image's labels, and the annotations of its manifests
// and index.
func (o *Options) labels() map[string]string {
	labels := map[string]string{
		"org.opencontainers.image.title":       "sluice",
		"org.opencontainers.image.description": "Adaptive overload control for HTTP services: reverse proxy",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
	}
	if o.Revision != "" {
		labels["org.opencontainers.image.revision"] = o.Revision
	}
	return labels
}

// variant is the OCI platform variant of a GOARCH: arm64 is v8 (what
// docker and podman record for it), the others have none here.
func variant(arch string) string {
	if arch == "arm64" {
		return "v8"
	}
	return ""
}

// buildImage returns one platform's image: what it is, its manifest's
// descriptor for the index, and its blobs (manifest, config, layer).
func buildImage(o Options, p Platform, files []layerFile, labels map[string]string) (Image, Descriptor, []blob, error) {
	im := Image{Arch: p.Arch}
	bin, err := os.ReadFile(p.Binary)
	if err != nil {
		return im, Descriptor{}, nil, err
	}
	if err := checkBinary(p.Binary, bin, p.Arch); err != nil {
		return im, Descriptor{}, nil, err
	}
	layer, diffID, err := buildLayer(o.Created, bin, files)
	if err != nil {
		return im, Descriptor{}, nil, err
	}
	im.Uncompressed, im.LayerSize = diffID.size, int64(len(layer))
	created := o.Created.Format(time.RFC3339)
	cfg := ImageConfig{Created: created, Architecture: p.Arch, OS: "linux", Variant: variant(p.Arch)}
	cfg.Config = RunConfig{
		User:       fmt.Sprintf("%d:%d", nonrootID, nonrootID),
		Entrypoint: []string{binaryPath},
		Cmd:        []string{"proxy", "--config", configDir + "/sluice.yaml"},
		Env:        []string{"SSL_CERT_FILE=/" + caPath},
		WorkingDir: "/",
		// The conventional client and admin ports (docs/operations.md).
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "9901/tcp": {}},
		Labels:       labels,
	}
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = []string{diffID.digest}
	cfg.History = []History{{created, "sluice lab/cmd/ociimage: /sluice, CA certificates, user nonroot"}}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return im, Descriptor{}, nil, err
	}
	cfgDesc := describe(mediaConfig, cfgJSON)
	layerDesc := describe(mediaLayer, layer)
	man := Manifest{SchemaVersion: 2, MediaType: mediaManifest, Config: cfgDesc, Layers: []Descriptor{layerDesc}, Annotations: labels}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return im, Descriptor{}, nil, err
	}
	im.Manifest, im.ConfigDigest, im.Layer = describe(mediaManifest, manJSON), cfgDesc.Digest, layerDesc
	desc := im.Manifest
	desc.Platform = &PlatformSpec{Architecture: p.Arch, OS: "linux", Variant: variant(p.Arch)}
	return im, desc, []blob{{im.Manifest.Digest, manJSON}, {cfgDesc.Digest, cfgJSON}, {layerDesc.Digest, layer}}, nil
}

// writeArchive writes the layout (oci-layout, index.json, the blobs in
// the order given, each digest once) as a tar file at out, through a
// temporary file, and returns its size.
func writeArchive(out string, created time.Time, index []byte, blobs []blob) (int64, error) {
	type entry struct {
		name string
		data []byte
	}
	files := []entry{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", index}}
	seen := map[string]bool{}
	for _, b := range blobs {
		if !seen[b.digest] {
			seen[b.digest] = true
			files = append(files, entry{blobPath(b.digest), b.data})
		}
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return 0, err
	}
	tw := tar.NewWriter(f)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		err = errors.Join(err, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: created, Format: tar.FormatPAX}))
	}
	for _, e := range files {
		err = errors.Join(err, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: created, Format: tar.FormatPAX}))
		_, werr := tw.Write(e.data)
		err = errors.Join(err, werr)
	}
	err = errors.Join(err, tw.Close(), f.Close())
	if err != nil {
		os.Remove(tmp)
		return 0, err
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return 0, err
	}
	return fi.Size(), os.Rename(tmp, out)
}

// layerDigest is a layer's uncompressed digest (its diff ID) and size.
type layerDigest struct {
	digest string
	size   int64
}

// layerFile is a regular file of the layer.
type layerFile struct {
	name string // path without the leading /
	mode int64
	data []byte
}

// buildLayer returns the gzip'd layer tar and its diff ID: /sluice (bin),
// the user nonroot, /tmp, and files (the CA bundle, the docs), each in a
// directory the layer creates.
func buildLayer(created time.Time, bin []byte, files []layerFile) ([]byte, layerDigest, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	hdr := func(h *tar.Header) *tar.Header {
		h.ModTime, h.Format = created, tar.FormatPAX
		return h
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonrootID, nonrootID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonrootID)
	files = append([]layerFile{{"etc/group", 0o644, []byte(group)}, {"etc/passwd", 0o644, []byte(passwd)}}, files...)
	files = append(files, layerFile{binaryPath[1:], 0o755, bin})
	dirs := map[string]bool{"etc/": true, "etc/sluice/": true, "home/": true, "tmp/": true}
	for _, f := range files {
		for d := path.Dir(f.name); d != "."; d = path.Dir(d) {
			dirs[d+"/"] = true
		}
	}
	var err error
	for _, d := range sortedKeys(dirs) {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		err = errors.Join(err, tw.WriteHeader(hdr(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode})))
		if d == "home/" {
			err = errors.Join(err, tw.WriteHeader(hdr(&tar.Header{Typeflag: tar.TypeDir, Name: "home/nonroot/", Mode: 0o700, Uid: nonrootID, Gid: nonrootID})))
		}
	}
	for _, f := range files {
		err = errors.Join(err, tw.WriteHeader(hdr(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data))})))
		_, werr := tw.Write(f.data)
		err = errors.Join(err, werr)
	}
	if err = errors.Join(err, tw.Close()); err != nil {
		return nil, layerDigest{}, err
	}
	sum := sha256.Sum256(raw.Bytes())
	size := int64(raw.Len())
	var gz bytes.Buffer
	// The default level: the best (9) takes twice as long for 0.4 % less.
	zw, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		return nil, layerDigest{}, err
	}
	// No name or time in the gzip header: the digest depends only on the
	// content.
	if _, err := io.Copy(zw, &raw); err != nil {
		return nil, layerDigest{}, err
	}
	if err := zw.Close(); err != nil {
		return nil, layerDigest{}, err
	}
	return gz.Bytes(), layerDigest{digest: "sha256:" + hex.EncodeToString(sum[:]), size: size}, nil
}

// describe returns the descriptor of a blob.
func describe(mediaType string, b []byte) Descriptor {
	sum := sha256.Sum256(b)
	return Descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(b))}
}

// blobPath is where a digest's blob lives in the layout.
func blobPath(digest string) string { return "blobs/sha256/" + digest[len("sha256:"):] }

// reTag is the grammar of an OCI distribution tag; reRepository a
// repository with an optional registry host and port.
var (
	reTag        = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
	reRepository = regexp.MustCompile(`^[a-z0-9]+(?:[.-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)+$|^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
)

// Tag is the image tag of a version: the version with "+" (semantic
// versioning's build metadata, which a tag cannot hold) written "_", as
// Helm does for charts in OCI registries: 0.1.0 is tagged 0.1.0,
// 0.0.0-dev+0123456789ab is tagged 0.0.0-dev_0123456789ab.
func Tag(version string) (string, error) {
	t := strings.ReplaceAll(version, "+", "_")
	if !reTag.MatchString(t) {
		return "", fmt.Errorf("version %q does not make an image tag ([A-Za-z0-9_][A-Za-z0-9._-]*, at most 128 characters)", version)
	}
	return t, nil
}

// elfMachines maps a GOARCH to its ELF machine.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM, "386": elf.EM_386,
	"ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390, "riscv64": elf.EM_RISCV,
}

// checkBinary returns an error unless bin is a static ELF executable for
// arch: a binary for another machine, or one that needs a dynamic loader
// (CGO_ENABLED=1), would not run in an image that has no libc.
func checkBinary(name string, bin []byte, arch string) error {
	want, ok := elfMachines[arch]
	if !ok {
		return fmt.Errorf("%s: architecture %q is not one of %v", name, arch, sortedKeys(elfMachines))
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("%s is not an ELF binary: %w", name, err)
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("%s is built for %s, not %s (%s)", name, f.Machine, arch, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s needs a dynamic loader (PT_INTERP): build it with CGO_ENABLED=0", name)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// validate checks o before anything is read or written.
func (o *Options) validate() error {
	var errs []error
	if len(o.Platforms) == 0 {
		errs = append(errs, errors.New("no binary: give one per architecture"))
	}
	seen := map[string]bool{}
	for _, p := range o.Platforms {
		if seen[p.Arch] {
			errs = append(errs, fmt.Errorf("architecture %s given twice", p.Arch))
		}
		seen[p.Arch] = true
	}
	docs := map[string]bool{}
	for _, d := range o.Docs {
		if docs[filepath.Base(d)] {
			errs = append(errs, fmt.Errorf("two docs named %s", filepath.Base(d)))
		}
		docs[filepath.Base(d)] = true
	}
	if o.Repository == "" {
		o.Repository = DefaultRepository
	}
	if !reRepository.MatchString(o.Repository) {
		errs = append(errs, fmt.Errorf("repository %q is not an image name (lower-case, [registry[:port]/]path)", o.Repository))
	}
	if _, err := Tag(o.Version); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
