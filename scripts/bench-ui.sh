#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-ui.sh: what the dashboard's update path costs the proxy. wrk runs
# through `sluice proxy` (one SEDA stage whose rate never binds, a trivial
# backend) with no dashboard open and with 5 viewers holding /ui/events
# open (curl -N, one sample a second each), alternating, and the medians
# are compared. The figure: the proxy keeps ≥ 99% of its throughput with 5
# viewers.
#
#   scripts/bench-ui.sh [RUNS] [DURATION]     # default 5 runs of 10s each
#
# The difference is small against run-to-run noise: run it on an idle
# machine, with enough runs. Installs Debian's wrk when missing (as root).
set -euo pipefail
runs=${1:-5}
dur=${2:-10s}
cd "$(dirname "$0")/.."
me=bench-ui
. scripts/bench-lib.sh

need wrk wrk || exit 2

bench_setup
viewers=()
stop_viewers() {
	for p in "${viewers[@]}"; do kill "$p" 2>/dev/null || true; done
	viewers=()
}
trap 'stop_viewers; cleanup' EXIT

be=$(port); sl=$(port); adm=$(port)

"$tmp/benchproxy" -trivial "127.0.0.1:$be" 2>"$tmp/backend.log" &
pids+=($!)
cat >"$tmp/sluice.yaml" <<YAML
listeners: [{addr: "127.0.0.1:$sl"}]
admin: {addr: "127.0.0.1:$adm"}
backends:
  servers: [{url: "http://127.0.0.1:$be"}]
stages:
  - name: all
    match: {path_prefix: /}
    controller: seda
    params: {target: 500ms, rate_max: 1000000, initial_rate: 1000000}
YAML
"$tmp/bin-sluice" proxy --config "$tmp/sluice.yaml" 2>"$tmp/sluice.log" &
pids+=($!)
for u in "http://127.0.0.1:$be/" "http://127.0.0.1:$sl/" "http://127.0.0.1:$adm/ui"; do
	for _ in $(seq 100); do
		curl -sf -o /dev/null "$u" && break
		sleep 0.1
	done
	curl -sf -o /dev/null "$u" || { echo "bench-ui: $u not answering" >&2; exit 1; }
done

start_viewers() {
	for i in 1 2 3 4 5; do
		curl -sN "http://127.0.0.1:$adm/ui/events" >"$tmp/viewer-$i.out" 2>/dev/null &
		viewers+=($!)
	done
	sleep 1.5
}

# run NAME: one wrk run; appends "rps p99_ms" to $tmp/res-NAME.
run() {
	local out rps p99
	out=$(wrk -t2 -c64 -d"$dur" --latency "http://127.0.0.1:$sl/")
	rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
	p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; print v}' <<<"$out")
	echo "$rps ${p99:-NaN}" >>"$tmp/res-$1"
	printf '  %-10s %10.0f req/s  p99 %7.3f ms\n' "$1" "$rps" "${p99:-NaN}"
}

wrk -t2 -c64 -d2s "http://127.0.0.1:$sl/" >/dev/null
echo "wrk -t2 -c64 -d$dur through sluice proxy, $runs runs each, alternating without and with 5 /ui/events viewers:"
for _ in $(seq "$runs"); do
	run none
	start_viewers
	run 5viewers
	stop_viewers
done
# The viewers received samples all along (a sanity check of the set-up).
got=$(cat "$tmp"/viewer-*.out | grep -c '^event: sample' || true)
echo "samples delivered to the viewers: $got"

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
n_rps=$(cut -d' ' -f1 "$tmp/res-none" | median); v_rps=$(cut -d' ' -f1 "$tmp/res-5viewers" | median)
n_p99=$(cut -d' ' -f2 "$tmp/res-none" | median); v_p99=$(cut -d' ' -f2 "$tmp/res-5viewers" | median)
awk -v nr="$n_rps" -v vr="$v_rps" -v np="$n_p99" -v vp="$v_p99" -v got="$got" 'BEGIN {
	printf "medians: no viewer %.0f req/s p99 %.3f ms; 5 viewers %.0f req/s p99 %.3f ms\n", nr, np, vr, vp
	printf "throughput with 5 viewers: %.2f%% of without (figure: >= 99%%)\n", 100*vr/nr
	exit !(vr/nr >= 0.99 && got > 0)
}'
