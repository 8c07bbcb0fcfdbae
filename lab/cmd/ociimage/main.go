// Command ociimage assembles sluice's container image without a base
// image, a registry or a container engine: one layer holding the static
// sluice binary, the CA certificates and a non-root user, written as an
// OCI image layout in a tar archive (the "oci-archive" transport of
// podman, skopeo and buildah; docker loads it from Docker 25 on).
//
//	go -C lab run ./cmd/ociimage -binary ../bin/sluice -version v1.2.3 \
//	    -revision $(git rev-parse HEAD) -out ../bin/sluice-image.oci.tar
//
// The image is reproducible: every timestamp is -created (default the
// Unix epoch), entries are in a fixed order with fixed owners, so the same
// inputs give the same digests. scripts/image.sh (make image) builds the
// binary and runs this.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// Media types of the OCI image specification (image-spec v1.1).
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Image settings.
const (
	// UID and GID of the image's user, "nonroot" (distroless's number).
	nonrootID = 65532
	// Where the binary and the configuration live in the image.
	binaryPath = "/sluice"
	configDir  = "/etc/sluice"
	caPath     = "etc/ssl/certs/ca-certificates.crt"
)

// Options are what an image is built from.
type Options struct {
	Binary   string    // the static sluice binary (linux, CGO_ENABLED=0)
	CACerts  string    // the CA bundle (Debian's ca-certificates)
	Name     string    // the image name of the ref ("sluice": NAME:VERSION)
	Version  string    // org.opencontainers.image.version and the ref's tag
	Revision string    // org.opencontainers.image.revision
	Source   string    // org.opencontainers.image.source
	Arch     string    // GOARCH of the binary
	Created  time.Time // every timestamp in the image
	Out      string    // the archive to write
}

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Index is index.json.
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// Manifest is the image manifest.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

// ImageConfig is the image configuration (the runtime's part in Config).
type ImageConfig struct {
	Created      string    `json:"created"`
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Config       RunConfig `json:"config"`
	RootFS       struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []struct {
		Created   string `json:"created"`
		CreatedBy string `json:"created_by"`
	} `json:"history"`
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

// Result describes a built image.
type Result struct {
	Manifest     Descriptor // its digest is the image's
	ConfigDigest string
	LayerSize    int64 // compressed
	Uncompressed int64 // the layer's tar
	ArchiveSize  int64
}

func main() {
	var o Options
	var created int64
	flag.StringVar(&o.Binary, "binary", "", "the static sluice binary (required)")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA certificate bundle to include")
	flag.StringVar(&o.Name, "name", "sluice", "image name: the archive's ref is NAME:VERSION")
	flag.StringVar(&o.Version, "version", "", "image version: label org.opencontainers.image.version and the ref's tag (required)")
	flag.StringVar(&o.Revision, "revision", "", "VCS revision: label org.opencontainers.image.revision")
	flag.StringVar(&o.Source, "source", "https://github.com/sluicehq/sluice", "label org.opencontainers.image.source")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "architecture of the binary")
	flag.Int64Var(&created, "created", 0, "Unix time of every timestamp in the image (SOURCE_DATE_EPOCH)")
	flag.StringVar(&o.Out, "out", "", "OCI archive to write (required)")
	flag.Parse()
	o.Created = time.Unix(created, 0).UTC()
	if o.Binary == "" || o.Version == "" || o.Out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: ociimage -binary FILE -version V -out FILE.oci.tar [-revision SHA] [-ca-certs FILE] [-created UNIX]")
		os.Exit(2)
	}
	r, err := Build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: image %s, layer %d bytes gzip'd (%d uncompressed), archive %d bytes\n",
		o.Out, r.Manifest.Digest, r.LayerSize, r.Uncompressed, r.ArchiveSize)
}

// Build writes the image described by o and returns what it wrote.
func Build(o Options) (Result, error) {
	var r Result
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return r, err
	}
	if len(bin) < 4 || string(bin[:4]) != "\x7fELF" {
		return r, fmt.Errorf("%s is not an ELF binary", o.Binary)
	}
	ca, err := os.ReadFile(o.CACerts)
	if err != nil {
		return r, fmt.Errorf("CA certificates: %w (apt-get install ca-certificates)", err)
	}
	layer, diffID, err := buildLayer(o.Created, bin, ca)
	if err != nil {
		return r, err
	}
	r.Uncompressed = diffID.size
	r.LayerSize = int64(len(layer))

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
	var cfg ImageConfig
	cfg.Created = o.Created.Format(time.RFC3339)
	cfg.Architecture, cfg.OS = o.Arch, "linux"
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
	cfg.History = append(cfg.History, struct {
		Created   string `json:"created"`
		CreatedBy string `json:"created_by"`
	}{cfg.Created, "sluice lab/cmd/ociimage: /sluice, CA certificates, user nonroot"})
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return r, err
	}
	cfgDesc := describe(mediaConfig, cfgJSON)
	layerDesc := describe(mediaLayer, layer)
	man := Manifest{SchemaVersion: 2, MediaType: mediaManifest, Config: cfgDesc, Layers: []Descriptor{layerDesc}, Annotations: labels}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return r, err
	}
	manDesc := describe(mediaManifest, manJSON)
	name := o.Name
	if name == "" {
		name = "sluice"
	}
	manDesc.Annotations = map[string]string{"org.opencontainers.image.ref.name": name + ":" + o.Version}
	idx, err := json.Marshal(Index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []Descriptor{manDesc}})
	if err != nil {
		return r, err
	}
	r.Manifest, r.ConfigDigest = manDesc, cfgDesc.Digest

	tmp := o.Out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return r, err
	}
	tw := tar.NewWriter(f)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", idx},
		{blobPath(manDesc.Digest), manJSON},
		{blobPath(cfgDesc.Digest), cfgJSON},
		{blobPath(layerDesc.Digest), layer},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		err = errors.Join(err, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: o.Created, Format: tar.FormatPAX}))
	}
	for _, e := range files {
		err = errors.Join(err, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: o.Created, Format: tar.FormatPAX}))
		_, werr := tw.Write(e.data)
		err = errors.Join(err, werr)
	}
	err = errors.Join(err, tw.Close(), f.Close())
	if err != nil {
		os.Remove(tmp)
		return r, err
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return r, err
	}
	r.ArchiveSize = fi.Size()
	return r, os.Rename(tmp, o.Out)
}

// layerDigest is a layer's uncompressed digest (its diff ID) and size.
type layerDigest struct {
	digest string
	size   int64
}

// buildLayer returns the gzip'd layer tar and its diff ID.
func buildLayer(created time.Time, bin, ca []byte) ([]byte, layerDigest, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	hdr := func(h *tar.Header) *tar.Header {
		h.ModTime, h.Format = created, tar.FormatPAX
		return h
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonrootID, nonrootID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonrootID)
	var err error
	for _, d := range []struct {
		name string
		mode int64
		uid  int
	}{{"etc/", 0o755, 0}, {"etc/ssl/", 0o755, 0}, {"etc/ssl/certs/", 0o755, 0}, {"etc/sluice/", 0o755, 0},
		{"home/", 0o755, 0}, {"home/nonroot/", 0o700, nonrootID}, {"tmp/", 0o1777, 0}} {
		err = errors.Join(err, tw.WriteHeader(hdr(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, Uid: d.uid, Gid: d.uid})))
	}
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"etc/group", 0o644, []byte(group)}, {"etc/passwd", 0o644, []byte(passwd)}, {caPath, 0o644, ca},
		{binaryPath[1:], 0o755, bin}} {
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
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
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
