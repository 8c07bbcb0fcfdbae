#!/usr/bin/env bash
# Installs what the tests of the dashboard and of deploy/ need when it is
# missing, from Debian's packages (root only): Chromium for the browser
# test of /ui (driven by chromedp) and promtool (package prometheus) for
# the alert rules. Called by `make test`, which then sets
# SLUICE_REQUIRE_BROWSER and SLUICE_REQUIRE_PROMTOOL so that those tests
# fail instead of skipping.
set -euo pipefail

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
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
