#!/usr/bin/env bash
# The main job on the embedded fixture corpus, from a fresh machine:
#   install + build → train a BPE tokenizer → tokenize → train cpu-small for about five minutes
#   (live progress line) → per-domain validation loss and bits per byte (with the contamination
#   audit against the training text).
# Everything is written under runs/demo/ (override with DEMO_DIR); safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

B=build/bin/marin
D=${DEMO_DIR:-runs/demo}
# 100 steps of 8×512 tokens take about five minutes on 2 Zen 4 vCPUs (measured: 3.0 s a step with
# the optimizer and validation); the time limit only guards a slower machine (the run then stops
# with a checkpoint before its schedule ends).
MINUTES=${DEMO_MINUTES:-8}
STEPS=${DEMO_STEPS:-100}
# Sleep rather than spin when a thread waits: on a busy 2-vCPU machine spinning OpenMP threads
# fight each other (measured: 4× slower under load); costs ~nothing on a quiet one.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$D"

echo "== 1/4 tokenizer: byte-level BPE, 8192 tokens, trained on the fixture's training split"
$B tokenizer train --vocab 8192 --in data/fixture/*/train-*.jsonl --out "$D/tokenizer.json"

echo "== 2/4 tokenize every domain (train and valid splits)"
$B tokenize --vocab "$D/tokenizer.json" --corpus data/fixture --out "$D/tokens"

echo "== 3/4 train cpu-small for $STEPS steps (at most $MINUTES min; MuonH, QB balancing, mixture of configs/fixture_mixture.toml)"
rm -rf "$D/run"
$B train --preset cpu-small --data configs/fixture_mixture.toml --token-dir "$D/tokens" \
  --tokenizer "$D/tokenizer.json" --batch 8 --steps "$STEPS" --eval-every 25 --eval-batches 4 \
  --ckpt-every 50 --time-limit $((MINUTES * 60)) --out "$D/run"

CKPT=$(ls -d "$D"/run/checkpoints/step-* | sort | tail -n 1)
echo "== 4/4 evaluate $CKPT on every validation domain (dropless; contamination vs the training text)"
$B eval --checkpoint "$CKPT" --tokens "$D/tokens" --corpus data/fixture \
  --train-corpus data/fixture --mixture configs/fixture_mixture.toml --json "$D/eval.json"
