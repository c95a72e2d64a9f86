#!/usr/bin/env bash
# Sets up (packages + build) and runs the whole test suite. This is the README's test command
# and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" --timeout 900
# Every parser's libFuzzer target from its committed seeds, a fixed run (docs/reliability.md,
# "Sanitizers and fuzzing"). The suite under ASan+UBSan is not here yet: HARDENING=asan.
HARDENING=fuzz scripts/test_hardening.sh
