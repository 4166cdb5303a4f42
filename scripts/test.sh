#!/usr/bin/env bash
# Sets up, builds and runs every test. GPU tests (ctest label `gpu`) skip cleanly when
# no CUDA device is present.
#   scripts/test.sh [BUILD_DIR] [extra cmake args...]
# KVRT_TEST_EXCLUDE, a ctest regex, leaves tests out (CI's sanitizer stage uses it).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
scripts/setup.sh "$@"
exclude=()
[ -n "${KVRT_TEST_EXCLUDE:-}" ] && exclude=(-E "$KVRT_TEST_EXCLUDE")
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "${exclude[@]}"
