#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# image.sh: build sluice's multi-architecture container image without
# pulling anything.
#
# Static binaries for linux/amd64 and linux/arm64 (scripts/build.sh), then
# lab/cmd/ociimage assembles, per architecture, one layer (/sluice,
# Debian's CA bundle, /etc/passwd and /etc/group with user nonroot 65532,
# LICENSE and NOTICE in /usr/share/doc/sluice/)
# and an image index of both, named REPOSITORY:TAG, written as an OCI
# archive: podman load -i bin/sluice-image.oci.tar
#
# Environment: OUT (default bin/sluice-image.oci.tar); BINDIR, a directory
# that already holds sluice-VERSION-linux-ARCH for each architecture
# (scripts/release.sh's dist/; default: build them); ARCHES (default
# "amd64 arm64"); REPOSITORY (default ghcr.io/sluicehq/sluice); VERSION,
# COMMIT and SOURCE_DATE_EPOCH (default scripts/version.sh's: the image
# is reproducible). The tag is VERSION with "+" written "_".
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
OUT=${OUT:-bin/sluice-image.oci.tar}
ARCHES=${ARCHES:-amd64 arm64}
REPOSITORY=${REPOSITORY:-ghcr.io/sluicehq/sluice}
VERSION=$(scripts/version.sh version)
COMMIT=$(scripts/version.sh commit)
SOURCE_DATE_EPOCH=$(scripts/version.sh epoch)
export VERSION COMMIT SOURCE_DATE_EPOCH
CA=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$CA" ]; then
	echo "image.sh: $CA is missing: apt-get install -y ca-certificates" >&2
	exit 1
fi
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac
mkdir -p "$(dirname "$OUT")"
if [ -z "${BINDIR:-}" ]; then
	BINDIR=$(mktemp -d)
	trap 'rm -rf "$BINDIR"' EXIT
	for arch in $ARCHES; do
		scripts/build.sh "$arch" "$BINDIR/sluice-$VERSION-linux-$arch"
	done
fi
case $BINDIR in /*) ;; *) BINDIR=$PWD/$BINDIR ;; esac
set --
for arch in $ARCHES; do
	set -- "$@" -binary "$arch=$BINDIR/sluice-$VERSION-linux-$arch"
done
$GO -C lab run ./cmd/ociimage "$@" -doc "$PWD/LICENSE" -doc "$PWD/NOTICE" -repository "$REPOSITORY" -version "$VERSION" \
	-revision "$COMMIT" -created "$SOURCE_DATE_EPOCH" -ca-certs "$CA" -out "$OUT"
