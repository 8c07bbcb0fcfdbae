#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Re-fetches the pinned uPlot release that the admin dashboard (/ui)
# embeds, from the npm registry, and checks it against the sha256 sums
# below. The committed files are the release's, unmodified:
#   proxy/internal/dashboard/ui/vendor/uplot/uPlot.iife.min.js, uPlot.min.css, LICENSE
# Usage: scripts/fetch-uplot.sh          download and check, then copy in place
#        scripts/fetch-uplot.sh --check  only check the committed files
# To move to another release, change VERSION and the sums (the script
# prints the new sums when they do not match) and review the diff.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=1.6.32
dest=proxy/internal/dashboard/ui/vendor/uplot
declare -A SUMS=(
  [uPlot.iife.min.js]=19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f
  [uPlot.min.css]=df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04
  [LICENSE]=8f989229699b4fe2f1a0432d0e9edc338a8a911e250e2d1b01ecd770a5f5b1bd
)

check() { # dir
  local ok=0 f got
  for f in "${!SUMS[@]}"; do
    got=$(sha256sum "$1/$f" | cut -d' ' -f1)
    if [ "$got" != "${SUMS[$f]}" ]; then
      echo "fetch-uplot: $1/$f: sha256 $got, want ${SUMS[$f]}" >&2
      ok=1
    fi
  done
  return $ok
}

if [ "${1:-}" = "--check" ]; then
  check "$dest" && echo "fetch-uplot: $dest matches uPlot $VERSION"
  exit
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "uplot@$VERSION" >/dev/null)
tar -xzf "$tmp/uplot-$VERSION.tgz" -C "$tmp"
mkdir -p "$tmp/out"
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$tmp/package/LICENSE" "$tmp/out/"
check "$tmp/out"
mkdir -p "$dest"
cp "$tmp/out/"* "$dest/"
echo "fetch-uplot: uPlot $VERSION in $dest, sha256 checked"
