#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test.sh: what `make test` runs, on a fresh 2-core machine in under ten
# minutes. In order:
#
#   - the Debian packages the tests need (scripts/test-deps.sh), installed
#     in the background while Go compiles, awaited before the first test;
#   - formatting and vet in every module, staticcheck over the product,
#     the import groups and the product's leanness (make fmt-check vet
#     lint-product);
#   - the product's tests: the packages with goroutines, locks or atomics
#     (RACE_PKGS in the Makefile) under the race detector only, the rest
#     plainly, and plainly too the few tests of the race packages that
#     mean nothing under -race (PLAIN_ONLY in the Makefile: allocation
#     counts, the full 10,000-request attack on the admin API);
#   - the lab's tests, the lab's concurrent packages under the race
#     detector;
#   - the live figures of cluster mode, last, with no other package's Go
#     tests beside them: only the chart's and alert rules' tests
#     (lab/deploy), the bookstore on a real PostgreSQL
#     (scripts/test-postgres.sh) and staticcheck over the lab (make
#     lint-lab, niced), which are not timed, run meanwhile.
#
# The image's podman test loads an image of this machine's architecture
# alone (SLUICE_IMAGE_ARCHES=native): cross-compiling the product for the
# other one would cost a fresh machine minutes; make release-check loads
# both. Each step's wall time is printed; test artifacts (the dashboard's
# screenshots) go to out/test/.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export GO

mkdir -p out
rm -rf out/test && mkdir -p out/test
start=$SECONDS

deps_log=out/test-deps.log
./scripts/test-deps.sh >"$deps_log" 2>&1 &
deps=$!
await_deps() {
	[ -n "$deps" ] || return 0
	local rc=0
	wait "$deps" || rc=$?
	deps=
	cat "$deps_log"
	if [ "$rc" -ne 0 ]; then
		echo "test: scripts/test-deps.sh failed (exit $rc)" >&2
		exit "$rc"
	fi
}

step() {
	local t0=$SECONDS line="$*"
	[ ${#line} -le 160 ] || line="${line:0:157}..."
	echo "== $line"
	"$@"
	echo "== $((SECONDS - t0)) s, $((SECONDS - start)) s in all: $line"
}

make_vars() { make -s --no-print-directory print-"$1"; }
RACE_PKGS=$(make_vars RACE_PKGS)
LAB_RACE_PKGS=$(make_vars LAB_RACE_PKGS)
PLAIN_ONLY=$(make_vars PLAIN_ONLY)
PLAIN_ONLY_PKGS=$(make_vars PLAIN_ONLY_PKGS)
# shellcheck disable=SC2086 # word splitting of package lists is meant
plain_pkgs=$(comm -23 <($GO list ./... | sort) <($GO list $RACE_PKGS | sort))

step make -s --no-print-directory fmt-check vet lint-product
await_deps
# shellcheck disable=SC2086
{
	step env SLUICE_REQUIRE_PROMTOOL=1 SLUICE_REQUIRE_REDIS=1 $GO test $plain_pkgs
	step env SLUICE_REQUIRE_REDIS=1 $GO test -run "$PLAIN_ONLY" $PLAIN_ONLY_PKGS
	step env SLUICE_REQUIRE_BROWSER=1 SLUICE_REQUIRE_REDIS=1 SLUICE_REQUIRE_PODMAN=1 SLUICE_IMAGE_ARCHES=native \
		$GO -C lab test -artifacts -outputdir "$PWD/out/test" -skip '^TestLiveClusterFigure' ./...
	step env SLUICE_REQUIRE_REDIS=1 $GO test -race $RACE_PKGS
	step env SLUICE_REQUIRE_REDIS=1 $GO -C lab test -race $LAB_RACE_PKGS
	# The cluster figures mostly wait on the clock (a few hundred
	# requests a second for about a minute): the chart's tests, the
	# PostgreSQL bookstore and the lab's staticcheck (niced), which are
	# not timed, run beside them.
	side_log=out/test-side.log
	(
		step env SLUICE_REQUIRE_PROMTOOL=1 $GO -C lab/deploy test ./...
		step ./scripts/test-postgres.sh
		step nice -n 10 make -s --no-print-directory lint-lab
	) >"$side_log" 2>&1 &
	side=$!
	step env SLUICE_REQUIRE_REDIS=1 $GO -C lab test -count=1 -v -run '^TestLiveClusterFigure' ./cluster/figures
	side_rc=0
	wait "$side" || side_rc=$?
	cat "$side_log"
	if [ "$side_rc" -ne 0 ]; then
		echo "test: the chart's or the bookstore's tests, or the lab's staticcheck, failed (exit $side_rc)" >&2
		exit "$side_rc"
	fi
}
echo "test: all passed in $((SECONDS - start)) s"
