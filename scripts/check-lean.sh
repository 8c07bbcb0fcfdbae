#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# check-lean.sh: the product module (the root) stays lean: none of the
# lab's libraries (plots, databases, the browser driver, the load
# recorder, progress bars) in its packages' dependencies or its go.mod,
# and no package importing `testing` outside _test.go files. make lint
# runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
heavy='^(gonum\.org/|github\.com/jackc/pgx|modernc\.org/|github\.com/chromedp/|github\.com/HdrHistogram/|github\.com/schollz/progressbar)'
bad=$(go list -deps ./... | grep -E "$heavy|^testing$" || true)
if [ -n "$bad" ]; then
  echo "check-lean: the product's packages depend on:" >&2
  echo "$bad" >&2
  for p in $(go list ./...); do
    go list -deps "$p" | grep -qE "$heavy|^testing$" && echo "  through $p" >&2
  done
  exit 1
fi
if grep -E "^\s*($(echo "$heavy" | sed 's/^\^//'))" go.mod; then
  echo "check-lean: go.mod requires a lab library (above)" >&2
  exit 1
fi
echo "check-lean: the product module is lean ($(go list -deps ./... | grep -c '\.') non-standard packages)"
