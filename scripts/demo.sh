#!/usr/bin/env bash
# Sets up and builds kvrt, then generates text from the bundled model (no download).
#   scripts/demo.sh ["prompt"] [extra kvrt run flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build >&2
prompt=${1:-"The meaning of life is"}
shift || true
exec build/kvrt run models/fortune-llama --prompt "$prompt" -n 64 --temperature 0.8 --top-k 50 \
  --seed 42 "$@"
