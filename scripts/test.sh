#!/usr/bin/env bash
# Sets up (packages + build) and runs the whole test suite. This is the README's test command
# and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" --timeout 900
# The hardening half (docs/reliability.md, "Sanitizers and fuzzing"): the suite again under
# ASan + UBSan, then every parser's libFuzzer target from its committed seeds, a fixed run.
scripts/test_hardening.sh
