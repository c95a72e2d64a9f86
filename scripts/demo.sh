#!/usr/bin/env bash
# The main job on the embedded fixture corpus, from a fresh machine:
#   install + build the binary → train a BPE tokenizer → tokenize → time one training step on this
#   CPU and size the run so its schedule completes in the budget (live progress line) →
#   per-domain validation loss and bits per byte on a fixed subset (with the contamination audit
#   against the training text) → a summary: where everything is, and what to try next.
# Everything is written under runs/demo/ (override with DEMO_DIR); safe to run again.
# DEMO_MINUTES: the training budget (default 5); DEMO_STEPS: force a step count instead;
# DEMO_NO_SETUP=1: use the binary already built (the README tour's test does).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -n "${DEMO_NO_SETUP:-}" ] || TARGET=marin scripts/setup.sh  # the tests are built by scripts/test.sh

B=build/bin/marin
D=${DEMO_DIR:-runs/demo}
MINUTES=${DEMO_MINUTES:-5}
mkdir -p "$D"
t0=$(date +%s)

echo "== 1/5 tokenizer: byte-level BPE, 8192 tokens, trained on the fixture's training split"
$B tokenizer train --vocab-size 8192 --in data/fixture/*/train-*.jsonl --out "$D/tokenizer.json"

echo "== 2/5 tokenize every domain (train and valid splits)"
$B tokenize --tokenizer "$D/tokenizer.json" --corpus data/fixture --out "$D/tokens"

echo "== 3/5 time a training step of cpu-small on this CPU"
BENCH=$($B bench --preset cpu-small --batch 8 --train --iters 1 --warmup 1 --json 2>/dev/null | tail -n 1)
read -r STEP_S FRACTION CPU ISA < <(/usr/bin/python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["step_seconds_median"], j["fraction_of_peak"], j["cpu"].replace(" ", "_"), j["isa"])' "$BENCH")
# Validation every 25 steps costs about one step each; leave 10 % for it and the checkpoints.
AUTO=$(/usr/bin/python3 -c "import sys; print(max(10, min(100, int(0.9 * $MINUTES * 60 / $STEP_S))))")
STEPS=${DEMO_STEPS:-$AUTO}
echo "   ${CPU//_/ } ($ISA): $(printf %.1f "$STEP_S") s a step → $STEPS steps" \
  "$([ -z "${DEMO_STEPS:-}" ] && [ "$STEPS" -lt 100 ] && echo "fit in $MINUTES min (100 on a faster CPU; DEMO_STEPS=100 to insist)")"

echo "== 4/5 train cpu-small for $STEPS steps (MuonH, QB balancing, mixture of configs/fixture_mixture.toml)"
rm -rf "$D/run"
$B train --preset cpu-small --data configs/fixture_mixture.toml --token-dir "$D/tokens" \
  --tokenizer "$D/tokenizer.json" --batch 8 --steps "$STEPS" --eval-every $(((STEPS + 3) / 4)) \
  --eval-batches 4 --keep-every "$STEPS" --time-limit $((MINUTES * 60 * 3)) --out "$D/run" \
  > "$D/train.json"

CKPT="$D/run/checkpoints/latest"  # a link to the newest checkpoint
echo "== 5/5 evaluate $CKPT ($(readlink "$CKPT")) on every validation domain (a fixed subset of 4,096 tokens each)"
$B eval --checkpoint "$CKPT" --token-dir "$D/tokens" --corpus data/fixture \
  --train-corpus data/fixture --mixture configs/fixture_mixture.toml --max-tokens 4096 \
  --json "$D/eval.json" > /dev/null

/usr/bin/python3 - "$D" "$CKPT" "$FRACTION" "$t0" <<'PY'
import json, sys, time
d, ckpt, fraction, t0 = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
m = [json.loads(l) for l in open(f"{d}/run/metrics.jsonl")]
valid = [s["valid_ce"] for s in m if "valid_ce" in s]
tps = sorted(s["tokens_per_second"] for s in m)[len(m) // 2]
ev = json.load(open(f"{d}/eval.json"))
macro = ev.get("macro", {})
print(f"""
== done in {(time.time() - t0) / 60:.1f} min
   trained {len(m)} steps: loss {m[0]['loss']:.3f} → {m[-1]['loss']:.3f}""" +
      (f", validation CE {valid[-1]:.3f}" if valid else "") +
      f""", {tps:.0f} tokens/s (median step)
   the timed step ran at {100 * fraction:.1f} % of this CPU's measured fp32 FMA peak (marin bench)
   run:        {d}/run   (metrics.jsonl: one line per step)
   checkpoint: {ckpt}
   tokenizer:  {d}/tokenizer.json      token shards: {d}/tokens
   evaluation: {d}/eval.json""" +
      (f"  (macro loss {macro['loss']:.3f}, bits per byte {macro['bpb']:.3f})"
       if isinstance(macro.get("loss"), (int, float)) and isinstance(macro.get("bpb"), (int, float)) else "") + f"""
   next:
     build/bin/marin sample --checkpoint {ckpt} --prompt "In the beginning" --max-tokens 64
     build/bin/marin eval --checkpoint {ckpt} --token-dir {d}/tokens --corpus data/fixture
     build/bin/marin train --resume {d}/run --steps {len(m) + 50}   # 50 more steps""")
PY
