// SPDX-License-Identifier: Apache-2.0

package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Archive is an image archive as ReadImage reads it back: index.json's
// one image, its index, and each platform's image with its layer's files.
type Archive struct {
	Name      string     // index.json's io.containerd.image.name: REPOSITORY:TAG
	Tag       string     // index.json's org.opencontainers.image.ref.name
	Index     Descriptor // the image index index.json points to
	Platforms []PlatformImage
}

// PlatformImage is one platform's image of an Archive.
type PlatformImage struct {
	Platform PlatformSpec
	Manifest Descriptor
	Config   ImageConfig
	// Files are the layer's regular files by path ("sluice",
	// "etc/passwd"), Headers every entry's header.
	Files   map[string][]byte
	Headers map[string]*tar.Header
}

// ReadImage reads the OCI archive at path the way a loader does: through
// index.json to the image index and each platform's manifest, config and
// layers, checking every blob against its descriptor's digest, size and
// media type, and every layer against the config's diff ID.
func ReadImage(path string) (*Archive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, h.Name, err)
			}
		}
	}
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		return nil, fmt.Errorf("%s: no OCI image layout (oci-layout %q)", path, files["oci-layout"])
	}
	blob := func(d Descriptor, media string) ([]byte, error) {
		b, ok := files[blobPath(d.Digest)]
		switch {
		case d.MediaType != media:
			return nil, fmt.Errorf("%s: media type %s, want %s", d.Digest, d.MediaType, media)
		case !ok:
			return nil, fmt.Errorf("%s: no such blob", d.Digest)
		case int64(len(b)) != d.Size || describe(media, b).Digest != d.Digest:
			return nil, fmt.Errorf("%s: the blob is %d bytes with digest %s, not %d bytes", d.Digest, len(b), describe(media, b).Digest, d.Size)
		}
		return b, nil
	}
	var top Index
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		return nil, fmt.Errorf("%s: index.json: %w", path, err)
	}
	if len(top.Manifests) != 1 {
		return nil, fmt.Errorf("%s: index.json lists %d images, want 1 (podman load takes one)", path, len(top.Manifests))
	}
	a := &Archive{Name: top.Manifests[0].Annotations[annotationImageName], Tag: top.Manifests[0].Annotations[annotationRefName], Index: top.Manifests[0]}
	b, err := blob(a.Index, mediaIndex)
	if err != nil {
		return nil, fmt.Errorf("%s: image index: %w", path, err)
	}
	var idx Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("%s: image index: %w", path, err)
	}
	for _, d := range idx.Manifests {
		p, err := readPlatform(d, blob)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		a.Platforms = append(a.Platforms, p)
	}
	return a, nil
}

// readPlatform reads the image of one descriptor of an image index.
func readPlatform(d Descriptor, blob func(Descriptor, string) ([]byte, error)) (PlatformImage, error) {
	p := PlatformImage{Manifest: d, Files: map[string][]byte{}, Headers: map[string]*tar.Header{}}
	if d.Platform == nil {
		return p, fmt.Errorf("manifest %s has no platform", d.Digest)
	}
	p.Platform = *d.Platform
	where := "linux/" + p.Platform.Architecture
	b, err := blob(d, mediaManifest)
	if err != nil {
		return p, fmt.Errorf("%s: manifest: %w", where, err)
	}
	var man Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return p, fmt.Errorf("%s: manifest: %w", where, err)
	}
	if b, err = blob(man.Config, mediaConfig); err != nil {
		return p, fmt.Errorf("%s: config: %w", where, err)
	}
	if err := json.Unmarshal(b, &p.Config); err != nil {
		return p, fmt.Errorf("%s: config: %w", where, err)
	}
	if len(man.Layers) != len(p.Config.RootFS.DiffIDs) {
		return p, fmt.Errorf("%s: %d layers, %d diff IDs", where, len(man.Layers), len(p.Config.RootFS.DiffIDs))
	}
	for i, l := range man.Layers {
		gz, err := blob(l, mediaLayer)
		if err != nil {
			return p, fmt.Errorf("%s: layer %d: %w", where, i, err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return p, fmt.Errorf("%s: layer %d: %w", where, i, err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			return p, fmt.Errorf("%s: layer %d: %w", where, i, err)
		}
		if id := describe("", raw).Digest; id != p.Config.RootFS.DiffIDs[i] {
			return p, fmt.Errorf("%s: layer %d: uncompressed digest %s, the config says %s", where, i, id, p.Config.RootFS.DiffIDs[i])
		}
		if err := readLayer(raw, p.Files, p.Headers); err != nil {
			return p, fmt.Errorf("%s: layer %d: %w", where, i, err)
		}
	}
	return p, nil
}

// readLayer adds a layer tar's entries to files and headers (a later
// layer's file replaces an earlier one's).
func readLayer(raw []byte, files map[string][]byte, headers map[string]*tar.Header) error {
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(h.Name, "./")
		headers[name] = h
		if h.Typeflag == tar.TypeReg {
			if files[name], err = io.ReadAll(tr); err != nil {
				return errors.Join(fmt.Errorf("%s", name), err)
			}
		}
	}
}
