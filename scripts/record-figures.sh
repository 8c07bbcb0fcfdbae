#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# record-figures.sh: run figures with --record and regenerate the table
# docs/experiments.md opens with (lab/figure/record).
#
#   scripts/record-figures.sh [sim|live|all] [NAME...]
#
# Default: every simulated figure (a few minutes in all). "live" runs
# every live experiment in its full form, one at a time (two to five
# minutes each; peers and adaptive install nginx and HAProxy with apt-get
# when run as root and missing): run it on an otherwise quiet machine,
# since each record keeps the load average at its start. NAMEs restrict
# the run to those figures. Each run replaces its figure's record in
# lab/results; the script then rewrites the table. Commit both. Run from
# the repository's root.
set -euo pipefail
mode=${1:-sim}
shift || true
make lab >/dev/null
lab=bin/sluice-lab
names() { "$lab" "$1" --list | awk '{print $1}'; }
want() { # want NAME: no NAMEs given, or NAME among them
	[ ${#only[@]} -eq 0 ] && return 0
	local w
	for w in "${only[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}
only=("$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
if [ "$mode" = sim ] || [ "$mode" = all ]; then
	for n in $(names sim); do
		if want "$n"; then
			"$lab" sim "$n" --out "$out/sim-$n" --record || failed=1
		fi
	done
fi
if [ "$mode" = live ] || [ "$mode" = all ]; then
	for n in $(names experiment); do
		if want "$n"; then
			"$lab" experiment "$n" --out "$out/live-$n" --record || failed=1
		fi
	done
fi
"$lab" results --write
"$lab" results
exit $failed
