#!/bin/sh
# image.sh: build sluice's container image without pulling anything.
#
# A static binary (CGO off, -trimpath, version and commit from git set at
# link time, since this environment builds with -buildvcs=false), then
# lab/cmd/ociimage assembles one layer (/sluice, Debian's CA bundle,
# /etc/passwd and /etc/group with user nonroot 65532) and writes an OCI
# archive: podman load -i bin/sluice-image.oci.tar
#
# Environment: OUT (default bin/sluice-image.oci.tar), GOARCH (default the
# host's), VERSION (default git describe), SOURCE_DATE_EPOCH (default the
# commit's time, so that the image is reproducible).
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
OUT=${OUT:-bin/sluice-image.oci.tar}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=$(git rev-parse HEAD 2>/dev/null || echo "")
if [ -n "$COMMIT" ] && ! git diff --quiet HEAD 2>/dev/null; then COMMIT="$COMMIT-dirty"; fi
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
ARCH=${GOARCH:-$($GO env GOARCH)}
CA=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$CA" ]; then
	echo "image.sh: $CA is missing: apt-get install -y ca-certificates" >&2
	exit 1
fi
mkdir -p "$(dirname "$OUT")"
BIN=$(mktemp -d)/sluice
trap 'rm -rf "$(dirname "$BIN")"' EXIT
PKG=github.com/sluicehq/sluice/internal/cli
CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH $GO build -trimpath \
	-ldflags "-s -w -X $PKG.version=$VERSION -X $PKG.commit=$COMMIT" -o "$BIN" ./cmd/sluice
$GO -C lab run ./cmd/ociimage -binary "$BIN" -version "$VERSION" -revision "$COMMIT" \
	-arch "$ARCH" -created "$SOURCE_DATE_EPOCH" -ca-certs "$CA" -out "$PWD/$OUT"
