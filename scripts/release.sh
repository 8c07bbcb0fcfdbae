#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# release.sh: build a release of sluice into dist/ (OUT), offline once the
# modules are in the module cache, and reproducibly.
#
# For linux/amd64 and linux/arm64:
#   sluice-VERSION-linux-ARCH           the static binary (scripts/build.sh)
#   sluice-VERSION-linux-ARCH.cdx.json  its SBOM, CycloneDX 1.6 JSON, made
#                                       from the modules the binary records
#                                       (cyclonedx-gomod, pinned in
#                                       lab/tools/sbom/go.mod), with their
#                                       licences as evidence
# and
#   sluice-VERSION-image.oci.tar        the multi-arch image of those two
#                                       binaries (scripts/image.sh)
#   LICENSE, NOTICE                     the licence, and the notices of what
#                                       the binaries hold
#   SHA256SUMS                          sha256sum -c SHA256SUMS checks them
#
# VERSION is scripts/version.sh's (git describe of the release tag, see
# RELEASING.md); the SBOMs carry no serial number and no time, and the
# image's timestamps are the commit's (SOURCE_DATE_EPOCH), so that the
# same commit built by the same Go toolchain gives the same bytes.
# `make release-check` proves it.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
OUT=${OUT:-dist}
VERSION=$(scripts/version.sh version)
COMMIT=$(scripts/version.sh commit)
SOURCE_DATE_EPOCH=$(scripts/version.sh epoch)
export VERSION COMMIT SOURCE_DATE_EPOCH
case $VERSION in *dirty*) echo "release.sh: warning: the tree has uncommitted changes ($VERSION)" >&2 ;; esac
rm -rf "$OUT"
mkdir -p "$OUT" bin
OUT=$(cd "$OUT" && pwd)
echo "release.sh: sluice $VERSION (commit $COMMIT) with $($GO env GOVERSION) into $OUT"
$GO -C lab/tools/sbom build -o "$PWD/bin/cyclonedx-gomod" github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
for arch in amd64 arm64; do
	bin=sluice-$VERSION-linux-$arch
	scripts/build.sh "$arch" "$OUT/$bin"
	# Licence detection reads the modules from the cache; GOPROXY=off
	# keeps it from the network (the main module, which no proxy has at
	# this version, is then skipped with a warning).
	GOPROXY=off GOFLAGS=-mod=mod bin/cyclonedx-gomod bin -json -licenses -noserial -notimestamp \
		-version "$VERSION" -output "$OUT/$bin.cdx.json" "$OUT/$bin" 2>"$OUT/.sbom.log" ||
		{ cat "$OUT/.sbom.log" >&2; exit 1; }
	rm -f "$OUT/.sbom.log"
done
BINDIR=$OUT OUT=$OUT/sluice-$VERSION-image.oci.tar scripts/image.sh >/dev/null
cp LICENSE NOTICE "$OUT/"
(cd "$OUT" && sha256sum LICENSE NOTICE sluice-* >SHA256SUMS)
cat "$OUT/SHA256SUMS"
