#!/usr/bin/env bash
# bench-wrk.sh: the proxy's throughput and tail latency next to a plain
# net/http/httputil.ReverseProxy, with wrk on loopback (issue 4's figure:
# throughput ratio >= 0.9, p99 at most 1 ms higher).
#
#   scripts/bench-wrk.sh [RUNS] [DURATION]     # default 3 runs of 10s each
#
# A trivial backend (128-byte 200 reply), the baseline proxy
# (proxy/internal/benchproxy: ReverseProxy with sluice's upstream transport),
# the same with a pool of copy buffers ("pooled", as sluice recycles them)
# and `sluice proxy` with one SEDA stage whose rate never binds run on free
# 127.0.0.1 ports; wrk -t2 -c64 alternates between the two proxies, and the
# medians are printed. Installs Debian's wrk when missing (as root).
set -euo pipefail
runs=${1:-3}
dur=${2:-10s}
cd "$(dirname "$0")/.."

if ! command -v wrk >/dev/null; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench-wrk: wrk is not installed; run: sudo apt-get install wrk" >&2
		exit 2
	fi
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/bin-sluice" ./cmd/sluice
go build -o "$tmp/benchproxy" ./proxy/internal/benchproxy

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
be=$(port); base=$(port); pool=$(port); sl=$(port); adm=$(port)

"$tmp/benchproxy" -trivial "127.0.0.1:$be" 2>"$tmp/backend.log" &
pids+=($!)
"$tmp/benchproxy" -listen "127.0.0.1:$base" -backend "http://127.0.0.1:$be" 2>"$tmp/baseline.log" &
pids+=($!)
"$tmp/benchproxy" -bufferpool -listen "127.0.0.1:$pool" -backend "http://127.0.0.1:$be" 2>"$tmp/pooled.log" &
pids+=($!)
cat >"$tmp/sluice.yaml" <<EOF
listeners: [{addr: "127.0.0.1:$sl"}]
admin: {addr: "127.0.0.1:$adm"}
backends:
  servers: [{url: "http://127.0.0.1:$be"}]
stages:
  - name: all
    match: {path_prefix: /}
    controller: seda
    params: {target: 500ms, rate_max: 1000000, initial_rate: 1000000}
EOF
"$tmp/bin-sluice" proxy --config "$tmp/sluice.yaml" 2>"$tmp/sluice.log" &
pids+=($!)

for u in "http://127.0.0.1:$be/" "http://127.0.0.1:$base/" "http://127.0.0.1:$pool/" "http://127.0.0.1:$sl/"; do
	for _ in $(seq 100); do
		curl -sf -o /dev/null "$u" && break
		sleep 0.1
	done
	curl -sf -o /dev/null "$u" || { echo "bench-wrk: $u not answering" >&2; exit 1; }
done

# run NAME URL: one wrk run; appends "rps p99_ms non2xx" to $tmp/res-NAME.
run() {
	local out rps p99 bad
	out=$(wrk -t2 -c64 -d"$dur" --latency "$2")
	rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
	p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; print v}' <<<"$out")
	bad=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
	echo "$rps ${p99:-NaN} ${bad:-0}" >>"$tmp/res-$1"
	printf '  %-9s %10.0f req/s  p99 %7.3f ms  non-2xx %s\n' "$1" "$rps" "${p99:-NaN}" "${bad:-0}"
}

wrk -t2 -c64 -d2s "http://127.0.0.1:$base/" >/dev/null
wrk -t2 -c64 -d2s "http://127.0.0.1:$pool/" >/dev/null
wrk -t2 -c64 -d2s "http://127.0.0.1:$sl/" >/dev/null
echo "wrk -t2 -c64 -d$dur, $runs runs each, alternating (trivial backend, loopback):"
for _ in $(seq "$runs"); do
	run baseline "http://127.0.0.1:$base/"
	run pooled "http://127.0.0.1:$pool/"
	run sluice "http://127.0.0.1:$sl/"
done

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
b_rps=$(cut -d' ' -f1 "$tmp/res-baseline" | median); s_rps=$(cut -d' ' -f1 "$tmp/res-sluice" | median)
b_p99=$(cut -d' ' -f2 "$tmp/res-baseline" | median); s_p99=$(cut -d' ' -f2 "$tmp/res-sluice" | median)
bad=$(awk '{s+=$3} END {print s+0}' "$tmp/res-sluice")
p_rps=$(cut -d' ' -f1 "$tmp/res-pooled" | median); p_p99=$(cut -d' ' -f2 "$tmp/res-pooled" | median)
awk -v br="$b_rps" -v sr="$s_rps" -v bp="$b_p99" -v sp="$s_p99" -v bad="$bad" -v pr="$p_rps" -v pp="$p_p99" 'BEGIN {
	printf "medians: baseline %.0f req/s p99 %.3f ms; pooled %.0f req/s p99 %.3f ms; sluice seda %.0f req/s p99 %.3f ms\n", br, bp, pr, pp, sr, sp
	printf "against the pooled baseline (ReverseProxy with a buffer pool, as sluice has): ratio %.3f, p99 %+.3f ms\n", sr/pr, sp-pp
	printf "throughput ratio %.3f (figure >= 0.9); p99 difference %+.3f ms (figure <= +1 ms); sluice non-2xx answers: %d\n", sr/br, sp-bp, bad
	exit !(sr/br >= 0.9 && sp-bp <= 1 && bad == 0)
}'
