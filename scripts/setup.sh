#!/usr/bin/env bash
# Installs kvrt's build dependencies (Debian/Ubuntu packages) and builds kvrt.
# Idempotent and quiet when everything is already installed.
#   scripts/setup.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${1:-build}
shift || true

packages=(build-essential cmake ninja-build pkg-config git
          nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
          libpcre2-dev libutf8proc-dev clang libclang-rt-14-dev clang-format
          libcpp-httplib-dev libedit-dev ccache)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The chat-template differential test renders with @huggingface/jinja under node
# (tests/node), and kvrt serve's tests use the openai client and autocannon there;
# without node and npm they skip, saying so.
if command -v npm >/dev/null 2>&1 &&
   { [ ! -f tests/node/node_modules/.package-lock.json ] ||
     [ tests/node/package-lock.json -nt tests/node/node_modules/.package-lock.json ]; }; then
  echo "setup: npm ci in tests/node"
  (cd tests/node && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

# The CUDA toolkit is optional: without nvcc kvrt builds its CPU engine only.
if [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

# ccache: a build of sources compiled before (another checkout, an earlier build tree)
# comes from the cache. Paths inside the checkout are hashed relative to it, so two
# clones share their entries.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
            -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
fi
cmake --build "$build_dir" -j "$(nproc)"
