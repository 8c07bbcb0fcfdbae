// SPDX-License-Identifier: Apache-2.0

// Command ociimage assembles sluice's multi-architecture container image
// without a base image, a registry or a container engine: per
// architecture, one layer holding the static sluice binary, the CA
// certificates, a non-root user and the licence and notices; an image index naming one image per
// platform (linux/amd64, linux/arm64); all of it written as an OCI image
// layout in a tar archive (the "oci-archive" transport of podman, skopeo
// and buildah; docker loads it from Docker 25 on).
//
//	go -C lab run ./cmd/ociimage -binary amd64=../dist/sluice-0.1.0-linux-amd64 \
//	    -binary arm64=../dist/sluice-0.1.0-linux-arm64 -version 0.1.0 \
//	    -revision $(git rev-parse HEAD) -out ../dist/sluice-0.1.0-image.oci.tar
//
// The archive names the image REPOSITORY:TAG (default repository
// ghcr.io/sluicehq/sluice; the tag is the version with "+" written "_",
// which a tag cannot hold): `podman load` and `docker load` tag it so.
//
// The image is reproducible: every timestamp is -created (default the
// Unix epoch), entries are in a fixed order with fixed owners, so the same
// inputs give the same digests (package release, which does the work).
// scripts/image.sh (make image) builds the binaries and runs this.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/lab/release"
)

// docsFlag collects -doc FILE.
type docsFlag []string

func (d *docsFlag) String() string { return fmt.Sprint(*d) }

func (d *docsFlag) Set(s string) error { *d = append(*d, s); return nil }

// platformFlag collects -binary ARCH=FILE.
type platformFlag []release.Platform

func (p *platformFlag) String() string { return fmt.Sprint(*p) }

func (p *platformFlag) Set(s string) error {
	arch, file, ok := strings.Cut(s, "=")
	if !ok || arch == "" || file == "" {
		return fmt.Errorf("%q: want ARCH=FILE (amd64=bin/sluice-linux-amd64)", s)
	}
	*p = append(*p, release.Platform{Arch: arch, Binary: file})
	return nil
}

func main() {
	var o release.Options
	var created int64
	var platforms platformFlag
	var docs docsFlag
	flag.Var(&platforms, "binary", "ARCH=FILE: the static sluice binary for GOARCH ARCH (repeat per architecture; required)")
	flag.Var(&docs, "doc", "FILE: a file for /"+release.DocDir+" (the licence, the notices; repeatable)")
	flag.StringVar(&o.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "CA certificate bundle to include")
	flag.StringVar(&o.Repository, "repository", release.DefaultRepository, "image repository: the archive names the image REPOSITORY:TAG")
	flag.StringVar(&o.Version, "version", "", "image version: label org.opencontainers.image.version and, with + as _, the tag (required)")
	flag.StringVar(&o.Revision, "revision", "", "VCS revision: label org.opencontainers.image.revision")
	flag.StringVar(&o.Source, "source", "https://github.com/sluicehq/sluice", "label org.opencontainers.image.source")
	flag.Int64Var(&created, "created", 0, "Unix time of every timestamp in the image (SOURCE_DATE_EPOCH)")
	flag.StringVar(&o.Out, "out", "", "OCI archive to write (required)")
	flag.Parse()
	o.Created = time.Unix(created, 0).UTC()
	o.Platforms, o.Docs = platforms, docs
	if len(o.Platforms) == 0 || o.Version == "" || o.Out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: ociimage -binary ARCH=FILE... -version V -out FILE.oci.tar [-doc FILE]... [-repository R] [-revision SHA] [-ca-certs FILE] [-created UNIX]")
		os.Exit(2)
	}
	r, err := release.BuildImage(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %s, index %s, archive %d bytes\n", o.Out, r.Ref, r.Index.Digest, r.ArchiveSize)
	for _, im := range r.Images {
		fmt.Printf("  linux/%s: image %s, layer %d bytes gzip'd (%d uncompressed)\n", im.Arch, im.Manifest.Digest, im.LayerSize, im.Uncompressed)
	}
}
