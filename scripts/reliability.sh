#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The long forms of the reliability suite (docs/reliability.md): the
# smuggling corpus, slowhttptest attacks beside a probe load, connection
# floods, reload under load, recovery after a backend stall and a
# 10-minute soak, against the sluice binary and, for comparison, nginx
# 1.22 with Debian's defaults. Installs Debian's nginx and slowhttptest
# when they are missing (root only). Results: out/reliability/results.md
# and one JSON file per test. About 45 minutes on 2 cores; give an idle
# machine. Arguments are passed to sluice-reliability, e.g.
#   scripts/reliability.sh stall                 # one test
#   scripts/reliability.sh -scale 0.1 all        # a quick check, not figures
#   scripts/reliability.sh -modes seda stall     # seda only
# Load goes to 127.0.0.1 only and every test ends by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v slowhttptest >/dev/null || need+=(slowhttptest)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "reliability: ${need[*]} missing; run as root, or: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "reliability: installing Debian's ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

go build -o bin/sluice ./cmd/sluice
(cd lab && go build -o ../bin/sluice-reliability ./reliability/cmd/sluice-reliability)
[ $# -eq 0 ] && set -- all
exec bin/sluice-reliability -sluice bin/sluice -out out/reliability "$@"
