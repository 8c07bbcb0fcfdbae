#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# build.sh: one static sluice binary, built as a release builds it.
#
#   scripts/build.sh GOARCH OUT
#
# For linux/GOARCH: CGO off (a static binary, no libc needed), -trimpath
# (no path of the machine in the binary), -buildvcs=false and an empty
# build ID, the version and commit of scripts/version.sh set at link time
# (internal/cli.version, internal/cli.commit), the baseline instruction
# set (GOAMD64=v1, GOARM64=v8.0), symbols and DWARF stripped, and nothing
# taken from GOFLAGS or GOEXPERIMENT: the same tree built by the same Go
# toolchain gives the same bytes, whichever directory it is in and
# whoever builds it. A test holds it to that (lab/release).
set -eu
if [ $# -ne 2 ]; then
	echo "usage: scripts/build.sh GOARCH OUT" >&2
	exit 2
fi
ARCH=$1
case $2 in
/*) OUT=$2 ;;
*) OUT=$PWD/$2 ;;
esac
cd "$(dirname "$0")/.."
GO=${GO:-go}
VERSION=$(scripts/version.sh version)
COMMIT=$(scripts/version.sh commit)
PKG=github.com/sluicehq/sluice/internal/cli
env CGO_ENABLED=0 GOOS=linux GOARCH="$ARCH" GOAMD64=v1 GOARM64=v8.0 GOFLAGS= GOEXPERIMENT= \
	"$GO" build -trimpath -buildvcs=false \
	-ldflags "-s -w -buildid= -X $PKG.version=$VERSION -X $PKG.commit=$COMMIT" \
	-o "$OUT" ./cmd/sluice
