#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what the tests of the dashboard, of deploy/ and of cluster
# mode need when it is missing, from Debian's packages (root only):
# Chromium for the browser test of /ui (driven by chromedp), promtool
# (package prometheus) for the alert rules and redis-server for cluster
# mode (the tests start their own on a free loopback port and stop it by
# pid; the package's own service is not used), and podman for the
# image's test (lab/release: podman load, inspect and mount, in a store
# of the test's own; no container is run), and PostgreSQL for the
# bookstore's test (scripts/test-postgres.sh runs its own server). One
# apt-get for all of them. `make test` (scripts/test.sh) runs this in the
# background while Go compiles, waits for it before the first test, and
# sets SLUICE_REQUIRE_BROWSER, SLUICE_REQUIRE_PROMTOOL,
# SLUICE_REQUIRE_REDIS and SLUICE_REQUIRE_PODMAN so that those tests fail
# instead of skipping.
set -euo pipefail

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v podman >/dev/null 2>&1 || need+=(podman)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "test-deps: missing ${need[*]}; run as root, or: apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "test-deps: installing Debian's ${need[*]}"
apt-get update -qq
# --no-install-recommends: no Prometheus server enabled as a service, no
# extra browser plugins.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
