#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# version.sh: what a build of sluice stamps into what it makes.
#
#   scripts/version.sh [version|commit|epoch]
#
# version (the default): the one version string of the build, a semantic
#   version without the "v": `git describe --tags` of the release tag
#   (v0.1.0 gives 0.1.0; three commits past it, 0.1.0-3-g0123456789ab;
#   "-dirty" when tracked files changed), or, in a tree with no release
#   tag, 0.0.0-dev+COMMIT (the commit's first 12 hex digits, "-dirty"
#   likewise): the string the binary prints when it was given no version
#   (internal/cli.DevVersion), and 0.0.0-dev outside Git.
# commit: the full commit, "-dirty" appended when tracked files changed;
#   empty outside Git.
# epoch: SOURCE_DATE_EPOCH, the commit's time (Unix seconds); 0 outside
#   Git. The image's timestamps are this, so it does not vary by the hour.
#
# VERSION, COMMIT and SOURCE_DATE_EPOCH in the environment override each
# (a leading "v" is dropped from VERSION): scripts/release.sh computes
# them once for every artifact.
set -eu
cd "$(dirname "$0")/.."
dirty() {
	git diff --quiet HEAD -- 2>/dev/null || echo -dirty
}
case ${1:-version} in
version)
	if [ -n "${VERSION:-}" ]; then
		v=$VERSION
	elif v=$(git describe --tags --match 'v[0-9]*' --abbrev=12 --dirty 2>/dev/null); then
		:
	elif c=$(git rev-parse --short=12 HEAD 2>/dev/null); then
		v=0.0.0-dev+$c$(dirty)
	else
		v=0.0.0-dev
	fi
	echo "${v#v}"
	;;
commit)
	if [ -n "${COMMIT+set}" ]; then
		echo "$COMMIT"
	elif c=$(git rev-parse HEAD 2>/dev/null); then
		echo "$c$(dirty)"
	else
		echo ""
	fi
	;;
epoch)
	if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
		echo "$SOURCE_DATE_EPOCH"
	else
		git log -1 --format=%ct 2>/dev/null || echo 0
	fi
	;;
*)
	echo "usage: scripts/version.sh [version|commit|epoch]" >&2
	exit 2
	;;
esac
