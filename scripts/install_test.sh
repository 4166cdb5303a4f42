#!/usr/bin/env bash
# Installs kvrt into a temporary prefix, builds examples/embed against it with
# find_package(kvrt), and runs it on the bundled model.
#   scripts/install_test.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S examples/embed -B "$work/example" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/example" >/dev/null
XDG_CACHE_HOME="$work/cache" "$work/example/kvrt_embed_example" models/fortune-llama \
  "The meaning of life is" 16
