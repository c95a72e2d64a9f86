#!/usr/bin/env bash
# Installs the Debian packages marin.cpp needs (idempotent; as root or with sudo) and builds
# the project into build/. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake ninja-build pkg-config
      libopenblas-openmp-dev libdnnl-dev ocl-icd-opencl-dev opencl-headers
      libopenmpi-dev openmpi-bin nlohmann-json3-dev libcli11-dev libtomlplusplus-dev
      libfmt-dev libspdlog-dev libzstd-dev libxxhash-dev libpcre2-dev
      libgtest-dev libgmock-dev libbenchmark-dev libhwy-dev python3-numpy python3-matplotlib
      clang libclang-rt-14-dev libomp-14-dev)  # clang: libFuzzer (scripts/test_hardening.sh)

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

BUILD=${BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} >/dev/null
# TARGET=marin builds only the binary (the demo); the default builds tests and benchmarks too.
cmake --build "$BUILD" -j"$(nproc)" ${TARGET:+--target "$TARGET"}
echo "setup: built $BUILD/bin/marin"
