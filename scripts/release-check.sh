#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# release-check.sh: build the release twice and check both builds
# (make release-check).
#
# 1. scripts/release.sh from this tree into OUT/a, with the build cache as
#    it is;
# 2. the same files (Git's tracked and untracked-but-not-ignored ones),
#    copied to OUT/tree, built there into OUT/b with an empty build cache
#    (GOCACHE=OUT/gocache), so that nothing of the first build is reused
#    and no path of either tree can hide in the result;
# 3. lab/cmd/releasecheck checks both (SHA256SUMS, static binaries whose
#    `sluice version` prints the version, the SBOMs against the modules in
#    the binaries, the image's name, platforms, labels and binaries) and
#    that they are the same, byte for byte;
# 4. lab/release's TestImagePodman with both architectures (make test
#    runs it with this machine's alone).
#
# Running the linux/arm64 binary needs qemu-user's emulator, installed
# from Debian when missing (as root). The modules must be in the module
# cache (one `make release` online first); the rest is offline.
# Environment: OUT (default out/release-check).
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
OUT=${OUT:-out/release-check}
VERSION=$(scripts/version.sh version)
COMMIT=$(scripts/version.sh commit)
SOURCE_DATE_EPOCH=$(scripts/version.sh epoch)
export VERSION COMMIT SOURCE_DATE_EPOCH
if ! command -v qemu-aarch64 >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "release-check: qemu-aarch64 is missing; run as root, or: apt-get install -y qemu-user" >&2
		exit 1
	fi
	echo "release-check: installing Debian's qemu-user (runs the linux/arm64 binary)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user >/dev/null
fi
rm -rf "$OUT"
mkdir -p "$OUT/tree" "$OUT/gocache"
OUT=$(cd "$OUT" && pwd)
OUT=$OUT/a scripts/release.sh
git ls-files -z --cached --others --exclude-standard |
	tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$OUT/tree"
GOCACHE=$OUT/gocache OUT=$OUT/b "$OUT/tree/scripts/release.sh"
$GO -C lab run ./cmd/releasecheck -version "$VERSION" "$OUT/a" "$OUT/b"
# The two-architecture image through podman (make test loads this
# machine's architecture alone): podman load, both platforms, each
# /sluice out of its layer. The compiled packages are the first build's.
./scripts/test-deps.sh
SLUICE_REQUIRE_PODMAN=1 $GO -C lab test -count=1 -run '^TestImagePodman$' ./release
rm -rf "$OUT/tree" "$OUT/gocache"
