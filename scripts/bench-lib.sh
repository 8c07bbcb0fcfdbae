# SPDX-License-Identifier: Apache-2.0
# bench-lib.sh: what the bench scripts share. Source it from the
# repository root after setting me (the script's name, for messages):
#
#   need PKG BIN   installs Debian's PKG for BIN when missing and root
#   bench_setup    makes $tmp, removed on exit together with every process
#                  whose pid is in pids (the trap runs cleanup), and builds
#                  sluice ($tmp/bin-sluice) and the plain reverse-proxy
#                  baseline ($tmp/benchproxy) into it
#   port           prints a free 127.0.0.1 port

# need PKG BIN: installs Debian's PKG for BIN when missing and root.
need() {
	command -v "$2" >/dev/null && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "$me: $2 is not installed (sudo apt-get install $1)" >&2
		return 1
	fi
	if [ -z "${updated:-}" ]; then
		apt-get update -q >/dev/null
		updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$1" >/dev/null
}

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}

bench_setup() {
	tmp=$(mktemp -d)
	pids=()
	trap cleanup EXIT
	go build -o "$tmp/bin-sluice" ./cmd/sluice
	(cd lab && go build -o "$tmp/benchproxy" ./cmd/benchproxy)
}
