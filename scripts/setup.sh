#!/usr/bin/env bash
# Installs the Debian packages marin.cpp needs (idempotent; as root or with sudo) and builds
# the project into build/. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake ninja-build pkg-config
      libopenblas-openmp-dev libdnnl-dev ocl-icd-opencl-dev opencl-headers
      libopenmpi-dev openmpi-bin nlohmann-json3-dev libcli11-dev libtomlplusplus-dev
      libfmt-dev libspdlog-dev libzstd-dev libxxhash-dev libpcre2-dev
      zlib1g-dev libsnappy-dev libutf8proc-dev libsimdjson-dev ccache
      libgtest-dev libgmock-dev libbenchmark-dev libhwy-dev python3-numpy python3-matplotlib
      python3-jinja2 python3-yaml python3-torch chromium
      clang libclang-rt-14-dev libomp-14-dev)  # clang: libFuzzer (scripts/test_hardening.sh)
# Node and npm (the report's charting library, the tokenizer cross-checks): Debian's packages
# unless some node is already installed (e.g. nodesource's, which bundles npm and conflicts).
command -v node >/dev/null || PKGS+=(nodejs)
command -v npm >/dev/null || PKGS+=(npm)
PKGS+=(zstd gzip)  # the zstd and gzip tools write the compressed inputs of tests/data/test_sources.cpp

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The charting library `marin report` inlines (embedded at build time by CMake, never
# committed): uPlot from npm, into the cache CMake's MARIN_UPLOT_DIR points at. Without the
# registry the build still succeeds and `marin report` says how to get it.
UPLOT_VERSION=1.6.32
report_npm="${MARIN_CACHE:-$HOME/.cache/marin}/npm-report"
if [ ! -f "$report_npm/node_modules/uplot/dist/uPlot.iife.min.js" ]; then
  # A subshell: npm_fetch exits when node or npm is missing, which must not end the set-up.
  (source scripts/npm_fetch.sh && npm_fetch "$report_npm" "uplot@$UPLOT_VERSION") ||
    echo "setup: could not install uplot@$UPLOT_VERSION from npm; marin report will be unavailable"
fi

BUILD=${BUILD_DIR:-build}
# ccache, where installed, makes rebuilds (and other checkouts of the same sources) cheap.
LAUNCHER=()
command -v ccache >/dev/null &&
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "${LAUNCHER[@]}" \
  -DMARIN_UPLOT_DIR="$report_npm/node_modules/uplot/dist" >/dev/null
# TARGET=marin builds only the binary (the demo); the default builds tests and benchmarks too.
cmake --build "$BUILD" -j"$(nproc)" ${TARGET:+--target "$TARGET"}
echo "setup: built $BUILD/bin/marin"
