#!/usr/bin/env bash
# Runs a node test file of kvrt serve; exits 77 (CTest's skip code here) when node or
# the npm modules (scripts/setup.sh runs npm ci in tests/node) are missing.
#   KVRT_CLI=build/kvrt tests/node/run_serve_tests.sh serve.test.mjs
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v node >/dev/null 2>&1; then
  echo "skipped: node is not installed"
  exit 77
fi
if [ ! -d node_modules/openai ] || [ ! -d node_modules/autocannon ]; then
  echo "skipped: npm modules missing (run npm ci in tests/node)"
  exit 77
fi
exec node --test --test-reporter=spec "$@"
