#!/usr/bin/env bash
# CTest's runner for the node:test files in tests/serve:
#
#   tests/serve/run_node_test.sh FILE.test.mjs [node args...]
#
# Exits 77 (CTest's SKIP_RETURN_CODE) with a message when node, or
# tests/serve/node_modules (`npm ci --prefix tests/serve`, which .ci/setup runs),
# is absent; otherwise runs `node --test FILE` and exits with its status.
# FUCINA_BIN, FUCINA_MODEL and FUCINA_SLOW_MODEL pass through to the test.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
file=${1:?usage: run_node_test.sh FILE.test.mjs}
shift
if ! command -v node >/dev/null; then
  echo "SKIP: no node on PATH (apt-get install nodejs)"
  exit 77
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 18 ]; then
  echo "SKIP: node $(node --version) is older than 18 (node:test, fetch)"
  exit 77
fi
if [ ! -d "$here/node_modules" ]; then
  echo "SKIP: no $here/node_modules (npm ci --prefix tests/serve --no-audit --no-fund)"
  exit 77
fi
if [ -n "${FUCINA_BIN:-}" ] && [ ! -x "$FUCINA_BIN" ]; then
  echo "FAIL: FUCINA_BIN=$FUCINA_BIN is not an executable" >&2
  exit 1
fi
case "$file" in /*) ;; *) file=$here/$file ;; esac
exec node --test --test-reporter=spec "$@" "$file"
