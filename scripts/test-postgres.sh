#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the bookstore's PostgreSQL tests against a throwaway PostgreSQL
# server on 127.0.0.1, installing Debian's postgresql package when it is
# missing (root only). The server lives in a temporary directory and is
# stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

bindir=""
find_bindir() {
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && bindir="$d"
  done
}
find_bindir
if [ -z "$bindir" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "test-postgres: PostgreSQL is not installed; run as root, or: apt-get install -y postgresql" >&2
    exit 1
  fi
  echo "test-postgres: installing Debian's postgresql package"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  find_bindir
fi

dir=$(mktemp -d /tmp/sluice-pg.XXXXXX)
# A free loopback port unless one is given (a fixed one clashes with a
# concurrent run).
port=${SLUICE_PG_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
run() { if [ "$(id -u)" -eq 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
[ "$(id -u)" -eq 0 ] && chown postgres "$dir"
cleanup() { run "$bindir/pg_ctl -D $dir/data -m immediate stop" >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT

run "$bindir/initdb -D $dir/data --auth=trust -U postgres" >/dev/null
run "$bindir/pg_ctl -D $dir/data -l $dir/log -w -o '-p $port -k $dir -c listen_addresses=127.0.0.1' start" >/dev/null
run "$bindir/psql -h $dir -p $port -U postgres -qc 'CREATE DATABASE sluicetest'" 

out=$(SLUICE_TEST_POSTGRES="postgres://postgres@127.0.0.1:$port/sluicetest?sslmode=disable" \
  go -C lab test -count=1 -v -run 'Postgres' ./testbed/ 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -E '^(--- |ok|FAIL)'
# A skipped test would prove nothing.
if ! echo "$out" | grep -q -- '--- PASS: TestBookstorePostgres'; then
  echo "test-postgres: TestBookstorePostgres did not run and pass" >&2
  exit 1
fi
