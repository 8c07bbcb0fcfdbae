#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# test.sh: what `make test` runs, on a fresh 2-core machine in under ten
# minutes. In order:
#
#   - the Debian packages the tests need (scripts/test-deps.sh), installed
#     in the background while Go compiles, awaited before the first test;
#   - formatting, and vet in the product and the lab (make fmt-check
#     vet-modules), which also compiles what the tests need;
#   - from then on, at the lowest priority (nice 19) in the background,
#     so that it uses only the CPU the tests leave idle while they wait
#     on the clock: staticcheck over the product with its import groups
#     and leanness (make lint-product), vet in the peer-reference tool
#     module (make vet-peerref) and staticcheck over the lab (make
#     lint-lab), and beside them vet in lab/deploy (make vet-deploy,
#     which compiles Helm and Kubernetes for the chart's tests too; last
#     in the same queue it ended the run). Staticcheck
#     analyses every dependency: on a fresh machine that is minutes of
#     CPU, which the foreground would otherwise wait for;
#   - the product's tests: the packages with goroutines, locks or atomics
#     (RACE_PKGS in the Makefile) under the race detector only, the rest
#     plainly, and plainly too the few tests of the race packages that
#     mean nothing under -race (PLAIN_ONLY in the Makefile: allocation
#     counts, the full 10,000-request attack on the admin API);
#   - the lab's tests, its concurrent packages (LAB_RACE_PKGS) under the
#     race detector only, as the product's;
#   - the live figures of cluster mode, last, with no other package's Go
#     tests beside them: only untimed jobs run meanwhile, the bookstore
#     on a real PostgreSQL (scripts/test-postgres.sh) and the chart's
#     and alert rules' tests (lab/deploy), once vet-deploy has compiled
#     what they need;
#   - the background lint's end, awaited and its output shown.
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
# shellcheck disable=SC2086
lab_plain_pkgs=$(comm -23 <($GO -C lab list ./... | sort) <($GO -C lab list $LAB_RACE_PKGS | sort))

# bg NAME CMD...: runs CMD in the background, its output in
# out/test-NAME.log; bg_wait NAME awaits it, shows the log and fails if
# it failed.
declare -A bg_pid
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
bg() {
	local name=$1
	shift
	("$@") >"out/test-$name.log" 2>&1 &
	bg_pid[$name]=$!
}
bg_wait() {
	local rc=0
	wait "${bg_pid[$1]}" || rc=$?
	cat "out/test-$1.log"
	if [ "$rc" -ne 0 ]; then
		echo "test: the background job $1 failed (exit $rc)" >&2
		exit "$rc"
	fi
}

step make -s --no-print-directory fmt-check vet-modules
# vet-deploy compiles Helm and Kubernetes, which the chart's tests beside
# the cluster figures need too: it holds out/deploy.lock while it runs,
# and the tests take the lock, so that whichever comes first compiles
# them and the other finds them built.
deploy_lock=out/deploy.lock
lint_jobs() {
	step nice -n 19 make -s --no-print-directory lint-product
	step nice -n 19 make -s --no-print-directory vet-peerref
	step nice -n 19 make -s --no-print-directory lint-lab
}
bg lint lint_jobs
bg deployvet step flock "$deploy_lock" nice -n 19 make -s --no-print-directory vet-deploy
await_deps
# shellcheck disable=SC2086
{
	step env SLUICE_REQUIRE_PROMTOOL=1 SLUICE_REQUIRE_REDIS=1 $GO test $plain_pkgs
	step env SLUICE_REQUIRE_REDIS=1 $GO test -run "$PLAIN_ONLY" $PLAIN_ONLY_PKGS
	step env SLUICE_REQUIRE_BROWSER=1 SLUICE_REQUIRE_REDIS=1 SLUICE_REQUIRE_PODMAN=1 SLUICE_IMAGE_ARCHES=native \
		$GO -C lab test -artifacts -outputdir "$PWD/out/test" -skip '^TestLiveClusterFigure' $lab_plain_pkgs
	step env SLUICE_REQUIRE_REDIS=1 $GO test -race $RACE_PKGS
	step env SLUICE_REQUIRE_REDIS=1 $GO -C lab test -race $LAB_RACE_PKGS
	# The cluster figures mostly wait on the clock (a few hundred
	# requests a second for about a minute): the untimed jobs run beside
	# them.
	side_jobs() {
		step ./scripts/test-postgres.sh
		step flock "$deploy_lock" env SLUICE_REQUIRE_PROMTOOL=1 $GO -C lab/deploy test ./...
	}
	bg side side_jobs
	step env SLUICE_REQUIRE_REDIS=1 $GO -C lab test -count=1 -v -run '^TestLiveClusterFigure' ./cluster/figures
	bg_wait side
	bg_wait deployvet
	bg_wait lint
}
echo "test: all passed in $((SECONDS - start)) s"
