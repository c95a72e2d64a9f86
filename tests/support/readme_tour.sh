#!/usr/bin/env bash
# The README tour, run as written (ctest: readme_tour). Makes a fresh demo (scripts/demo.sh with
# 2 steps, the binary already built), then runs every line of the ```bash blocks between
# <!-- tour --> and <!-- /tour --> in order, in one shell, stopping at the first failure. The only
# change to the commands: every --steps / --ckpt-every / --eval-every / --keep-every count is
# divided by ten (rounded up), so the relations between them (a resume or fork past the last
# checkpoint) still hold.
# Usage: tests/support/readme_tour.sh REPO_ROOT BUILD_BIN_DIR
set -euo pipefail
repo=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/marin-tour.XXXXXX")
trap 'rm -rf "$work"' EXIT
# A working directory that looks like a clone with a build: the tour's relative paths hold.
mkdir -p "$work/build"
ln -s "$bin" "$work/build/bin"
for p in scripts configs data README.md; do ln -s "$repo/$p" "$work/$p"; done
cd "$work"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=passive

echo "== the demo (DEMO_STEPS=2)"
DEMO_NO_SETUP=1 DEMO_STEPS=2 scripts/demo.sh > demo.log 2>&1 || { cat demo.log; exit 1; }
grep -q "== done in" demo.log || { cat demo.log; echo "readme_tour: the demo printed no summary"; exit 1; }

/usr/bin/python3 - "$repo/README.md" > tour.sh <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"<!-- tour -->(.*?)<!-- /tour -->", text, re.S)
if not m:
    sys.exit("readme_tour: README.md has no <!-- tour --> ... <!-- /tour --> section")
blocks = re.findall(r"```bash\n(.*?)```", m.group(1), re.S)
if not blocks:
    sys.exit("readme_tour: the tour has no bash blocks")
shorter = lambda mm: f"{mm.group(1)} {-(-int(mm.group(2)) // 10)}"
print("set -euxo pipefail")
for b in blocks:
    print(re.sub(r"(--steps|--ckpt-every|--eval-every|--keep-every) (\d+)", shorter, b))
PY
echo "== the tour ($(grep -c . tour.sh) lines)"
bash tour.sh
echo "readme_tour: every command of the tour ran"

# The demo run's report (the tour wrote it) renders in a real browser with every chart filled.
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "readme_tour: chromium is not installed: the report's rendering is not checked"
  exit 0
fi
dom=$("$browser" --headless --no-sandbox --disable-gpu --virtual-time-budget=10000 \
  --window-size=1280,5200 --dump-dom "file://$work/runs/tour/report.html" 2>/dev/null)
grep -q 'data-ready="1"' <<<"$dom" || { echo "readme_tour: the report's script did not finish"; exit 1; }
charts=$(grep -o 'data-charts="[0-9]*"' <<<"$dom" | grep -o '[0-9]*')
filled=$(grep -o 'data-charts-with-data="[0-9]*"' <<<"$dom" | grep -o '[0-9]*')
echo "readme_tour: the demo run's report: $filled of $charts charts with data"
[ "${charts:-0}" -gt 0 ] && [ "$charts" = "$filled" ]
