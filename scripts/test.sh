#!/usr/bin/env bash
# Sets up (packages + build) and runs the whole test suite. This is the README's test command
# and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" --timeout 900
# The suite under ASan+UBSan and the fuzz targets (docs/reliability.md) run apart for now:
# scripts/test_hardening.sh (HARDENING=asan|fuzz for one half).
