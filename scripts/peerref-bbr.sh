#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# peerref-bbr.sh: sluice's bbr controller against kratos/aegis's own BBR
# limiter (github.com/go-kratos/aegis/ratelimit/bbr, used as a library) on
# the workload of `sluice-lab experiment adaptive`, in one process on
# 127.0.0.1. Builds lab/tools/peerref/cmd/bbr-compare (a nested module, not
# part of the main one) and runs it; the tables go to stdout and to
# out/peerref/bbr-compare.md, the per-second progress lines (each
# limiter's estimate) to stderr and out/peerref/bbr-compare.log.
#
#   scripts/peerref-bbr.sh                    # all five phases, ~5 min
#   scripts/peerref-bbr.sh -phases a,b        # any bbr-compare flags
#
# The run is bounded: it is killed after PEERREF_TIMEOUT seconds (default
# 480). Other load on the machine moves the numbers (and aegis's CPU
# gauge reads the whole machine): note `uptime` before a run.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${PEERREF_TIMEOUT:-480}
mkdir -p out/peerref
bin=out/peerref/bbr-compare
(cd lab/tools/peerref && go build -o ../../../"$bin" ./cmd/bbr-compare)
echo "peerref-bbr: load average $(cut -d' ' -f1-3 /proc/loadavg) before the run" >&2
timeout --signal=INT --kill-after=30 "$limit" "$bin" -out out/peerref/bbr-compare.md "$@" \
	2> >(tee out/peerref/bbr-compare.log >&2)
