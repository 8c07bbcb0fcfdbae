#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench-wrk.sh: the proxy's own cost next to a plain Go reverse proxy,
# nginx and HAProxy, with wrk on loopback (docs/profiling.md).
#
#   scripts/bench-wrk.sh [ROUNDS] [DURATION] [TARGET...]
#
# Defaults: 3 rounds of 10s per target, every target. Targets:
#   pooled          net/http/httputil.ReverseProxy with sluice's upstream
#                   transport and a pool of copy buffers (the baseline,
#                   proxy/internal/benchproxy)
#   auto            `sluice proxy` quick start, its default mode
#   seda yaksha gradient2 envoy-gradient bbr none
#                   the quick start with that --controller
#   nginx haproxy   the two with keep-alive upstreams, one worker/thread
#                   per core (installed with apt-get when run as root)
#   T-unbuffered    sluice target T with --response-buffering=false
#                   (response buffering off; not in the default set)
#
# req/s counts 200 answers only. Every target proxies to one trivial backend (a $SIZE-byte 200 reply,
# default 1024) on free 127.0.0.1 ports. Each round runs every target once
# for DURATION with wrk -t2 -c$CONNS (default 64), the order rotated by one
# each round so that no target always runs first or last after a given
# other. Per run it records requests/s, p99 and the proxy's CPU per
# request: the utime+stime the proxy's processes gained during the run in
# /proc/PID/stat (nginx: master and workers), divided by wrk's request
# count. It prints each run, then per target the median and range of the
# rounds, and the ratios of the medians to the pooled baseline and to
# nginx. Only the ratios mean anything across machines.
#
# With SLUICE_BEFORE=PATH (another sluice binary, e.g. built from an
# older commit), every sluice target T also runs as T-before with that
# binary, in the same rounds: a before/after comparison in one run.
#
# The figures it checks (docs/profiling.md) for every sluice target:
# req/s >= 1.0x pooled, CPU per request <= pooled's, p99 <= pooled's + 0.5
# ms. A controller whose limit binds at -c64 answers 503s (reported, and
# left out of req/s). It exits 1 on socket errors or when a target fails
# to start; a missed figure is printed, not an error (the box may be
# busy).
set -euo pipefail
rounds=${1:-3}
dur=${2:-10s}
shift 2 2>/dev/null || shift $#
all=(pooled auto seda yaksha gradient2 envoy-gradient bbr none nginx haproxy)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")
conns=${CONNS:-64}
size=${SIZE:-1024}
cd "$(dirname "$0")/.."

for t in "${targets[@]}"; do
	base=${t%-unbuffered}
	case "$base" in pooled | nginx | haproxy) [ "$base" = "$t" ] || base=unknown ;; esac
	case " ${all[*]} " in *" $base "*) ;; *)
		echo "bench-wrk: unknown target $t (valid: ${all[*]})" >&2
		exit 2
		;;
	esac
done
case "$rounds" in '' | *[!0-9]* | 0)
	echo "bench-wrk: ROUNDS $rounds must be a positive integer" >&2
	exit 2
	;;
esac

me=bench-wrk
. scripts/bench-lib.sh
need wrk wrk || exit 2
kept=()
for t in "${targets[@]}"; do
	case $t in
	nginx) need nginx-light nginx || need nginx nginx || { echo "bench-wrk: skipping nginx" >&2; continue; } ;;
	haproxy) need haproxy haproxy || { echo "bench-wrk: skipping haproxy" >&2; continue; } ;;
	esac
	kept+=("$t")
done
targets=("${kept[@]}")
if [ -n "${SLUICE_BEFORE:-}" ]; then
	[ -x "$SLUICE_BEFORE" ] || { echo "bench-wrk: SLUICE_BEFORE=$SLUICE_BEFORE is not an executable" >&2; exit 2; }
	for t in "${targets[@]}"; do
		case $t in pooled | nginx | haproxy | *-unbuffered) ;; *) targets+=("$t-before") ;; esac
	done
fi

bench_setup
chmod 755 "$tmp"
be=$(port)
"$tmp/benchproxy" -trivial "127.0.0.1:$be" -size "$size" 2>"$tmp/backend.log" &
pids+=($!)

declare -A url pid
for t in "${targets[@]}"; do
	p=$(port)
	url[$t]="http://127.0.0.1:$p/"
	case $t in
	pooled)
		"$tmp/benchproxy" -bufferpool -listen "127.0.0.1:$p" -backend "http://127.0.0.1:$be" 2>"$tmp/$t.log" &
		;;
	nginx)
		mkdir -p "$tmp/nginx"
		cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes auto;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log error;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $tmp/nginx/body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi;
    uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    upstream backend { server 127.0.0.1:$be; keepalive 64; }
    server {
        listen 127.0.0.1:$p;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
		nginx -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -g 'daemon off;' 2>"$tmp/$t.log" &
		;;
	haproxy)
		cat >"$tmp/haproxy.cfg" <<EOF
global
    nbthread $(nproc)
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    http-reuse always
frontend f
    bind 127.0.0.1:$p
    default_backend b
backend b
    server s1 127.0.0.1:$be
EOF
		haproxy -f "$tmp/haproxy.cfg" -db 2>"$tmp/$t.log" &
		;;
	*)
		bin=$tmp/bin-sluice ctl=$t
		case $t in *-before) bin=$SLUICE_BEFORE ctl=${t%-before} ;; esac
		extra=()
		case $ctl in *-unbuffered) ctl=${ctl%-unbuffered} extra=(--response-buffering=false) ;; esac
		case $ctl in
		seda) extra+=(--target-p90 500ms) ;;
		yaksha) extra+=(--target-mean 200ms) ;;
		esac
		"$bin" proxy --listen "127.0.0.1:$p" --backend "http://127.0.0.1:$be" \
			--admin "127.0.0.1:$(port)" --controller "$ctl" "${extra[@]}" --log-level warn 2>"$tmp/$t.log" &
		;;
	esac
	pid[$t]=$!
	pids+=($!)
done

for t in "${targets[@]}"; do
	for _ in $(seq 100); do
		curl -sf -o /dev/null "${url[$t]}" && break
		sleep 0.1
	done
	curl -sf -o /dev/null "${url[$t]}" || {
		echo "bench-wrk: $t (${url[$t]}) not answering:" >&2
		cat "$tmp/$t.log" >&2
		exit 1
	}
done

hz=$(getconf CLK_TCK)
# ticks PID: utime+stime of PID and its children (nginx's workers).
ticks() {
	local s=0 p
	for p in $1 $(pgrep -P "$1" || true); do
		[ -r "/proc/$p/stat" ] || continue
		s=$((s + $(sed 's/^.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
	done
	echo "$s"
}

# run TARGET: one wrk run; appends "ok_per_s p99_ms cpu_us_per_req non200
# socket_errors" to $tmp/res-TARGET.
run() {
	local t=$1 out rps p99 n rej bad c0 c1 cpu
	c0=$(ticks "${pid[$t]}")
	out=$(wrk -t2 -c"$conns" -d"$dur" --latency "${url[$t]}")
	c1=$(ticks "${pid[$t]}")
	rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
	p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; print v}' <<<"$out")
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	rej=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
	rej=${rej:-0}
	bad=$(awk '/Socket errors:/ {gsub(",",""); s = $4+$6+$8+$10} END {print s+0}' <<<"$out")
	# req/s counts the 200 answers only: a rejection is cheaper than a
	# proxied answer and would flatter a controller that sheds.
	rps=$(awk -v r="$rps" -v n="${n:-0}" -v x="$rej" 'BEGIN {print (n > 0) ? r * (n - x) / n : 0}')
	cpu=$(awk -v d=$((c1 - c0)) -v hz="$hz" -v n="${n:-0}" 'BEGIN {print (n > 0) ? d * 1e6 / hz / n : "NaN"}')
	echo "$rps ${p99:-NaN} $cpu $rej $bad" >>"$tmp/res-$t"
	printf '  %-15s %9.0f ok/s  p99 %7.3f ms  CPU %6.1f us/req  non-200 %s  socket errors %s\n' "$t" "$rps" "${p99:-NaN}" "$cpu" "$rej" "$bad"
}

for t in "${targets[@]}"; do wrk -t2 -c"$conns" -d2s "${url[$t]}" >/dev/null; done
echo "wrk -t2 -c$conns -d$dur, $rounds rounds, targets rotated each round ($size-byte replies, loopback, $(nproc) cores):"
n=${#targets[@]}
for r in $(seq 0 $((rounds - 1))); do
	echo "round $((r + 1)):"
	for i in $(seq 0 $((n - 1))); do
		run "${targets[$(((i + r) % n))]}"
	done
done

# stats FILE COLUMN: "median min max" of a column.
stats() { cut -d' ' -f"$2" "$1" | sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; print m, a[1], a[NR]}'; }
echo
printf '%-15s %24s %26s %24s %8s %8s %8s\n' target "200s/s median [range]" "p99 ms median [range]" "CPU us/req med [range]" "x pooled" "CPU x" "x nginx"
declare -A med_rps med_p99 med_cpu
for t in "${targets[@]}"; do
	read -r med_rps[$t] _ _ < <(stats "$tmp/res-$t" 1)
	read -r med_p99[$t] _ _ < <(stats "$tmp/res-$t" 2)
	read -r med_cpu[$t] _ _ < <(stats "$tmp/res-$t" 3)
done
fail=0
for t in "${targets[@]}"; do
	read -r rm r0 r1 < <(stats "$tmp/res-$t" 1)
	read -r pm p0 p1 < <(stats "$tmp/res-$t" 2)
	read -r cm c0 c1 < <(stats "$tmp/res-$t" 3)
	awk -v t="$t" -v rm="$rm" -v r0="$r0" -v r1="$r1" -v pm="$pm" -v p0="$p0" -v p1="$p1" -v cm="$cm" -v c0="$c0" -v c1="$c1" \
		-v pr="${med_rps[pooled]:-}" -v pc="${med_cpu[pooled]:-}" -v nr="${med_rps[nginx]:-}" 'BEGIN {
		xp = (pr != "") ? sprintf("%.3f", rm/pr) : "-"; xc = (pc != "") ? sprintf("%.3f", cm/pc) : "-"; xn = (nr != "") ? sprintf("%.3f", rm/nr) : "-"
		printf "%-15s %8.0f [%6.0f-%6.0f] %8.3f [%6.3f-%7.3f] %8.1f [%5.1f-%6.1f] %8s %8s %8s\n", t, rm, r0, r1, pm, p0, p1, cm, c0, c1, xp, xc, xn
	}'
	rej=$(awk '{s+=$4} END {print s+0}' "$tmp/res-$t")
	bad=$(awk '{s+=$5} END {print s+0}' "$tmp/res-$t")
	[ "$rej" -ne 0 ] && echo "  $t: $rej answers other than 200 (rejections: the controller's limit binds at -c$conns)"
	if [ "$bad" -ne 0 ]; then
		echo "  $t: $bad socket errors" >&2
		fail=1
	fi
done
if [ -n "${med_rps[pooled]:-}" ]; then
	echo
	echo "figures against pooled (req/s >= 1.0x, CPU/req <= 1.0x, p99 <= +0.5 ms):"
	for t in "${targets[@]}"; do
		case $t in pooled | nginx | haproxy) continue ;; esac
		awk -v t="$t" -v r="${med_rps[$t]}" -v pr="${med_rps[pooled]}" -v c="${med_cpu[$t]}" -v pc="${med_cpu[pooled]}" \
			-v p="${med_p99[$t]}" -v pp="${med_p99[pooled]}" 'BEGIN {
			ok = (r >= pr && c <= pc && p <= pp + 0.5)
			printf "  %-15s %.3fx req/s, %.3fx CPU, p99 %+.3f ms: %s\n", t, r/pr, c/pc, p-pp, ok ? "met" : "missed"
		}'
	done
fi
exit $fail
