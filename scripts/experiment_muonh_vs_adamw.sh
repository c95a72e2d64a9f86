#!/usr/bin/env bash
# docs/experiments.md: cpu-small on the fixture mixture, MuonH (the recipe) vs an AdamW baseline on
# the same tokens, each at its best learning rate from a small sweep. Writes runs/exp-opt/.
# Usage: [MUONH_MULTS="0.5 1 2 4 8"] [ADAMW_LRS="0.001 0.003 0.01"] [EXP_DIR=runs/exp-opt] \
#        scripts/experiment_muonh_vs_adamw.sh [STEPS] [BATCH]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${MARIN:-build/bin/marin}
D=${EXP_DIR:-runs/exp-opt}
STEPS=${1:-150}
BATCH=${2:-4}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$D"
[ -f "$D/tokenizer.json" ] || $B tokenizer train --vocab-size 8192 --in data/fixture/*/train-*.jsonl --out "$D/tokenizer.json"
[ -f "$D/tokens/manifest.json" ] || $B tokenize --tokenizer "$D/tokenizer.json" --corpus data/fixture --out "$D/tokens"
common=(--preset cpu-small --data configs/fixture_mixture.toml --token-dir "$D/tokens"
        --tokenizer "$D/tokenizer.json" --batch "$BATCH" --steps "$STEPS" --seed 1
        --eval-every $((STEPS / 10)) --eval-batches 8)
run() {  # name, extra args...
  local name=$1; shift
  if [ -d "$D/$name/checkpoints/step-$(printf %08d "$STEPS")" ]; then return; fi
  rm -rf "${D:?}/$name"
  $B train "${common[@]}" "$@" --out "$D/$name" 2>"$D/$name.log" >/dev/null
}
# The §5 rule's rates for this shape, then ×0.5 … ×8 around them.
read -r MU AD < <($B plan --preset cpu-small --batch "$BATCH" --steps "$STEPS" --json |
  /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["muonh_lr"], j["adam_lr"])')
sweep_muonh() {
  for m in ${MUONH_MULTS-0.5 1 2 4 8}; do
    run "muonh-x$m" --optimizer muonh \
      --muonh-lr "$(/usr/bin/python3 -c "print($MU*$m)")" --adam-lr "$(/usr/bin/python3 -c "print($AD*$m)")"
  done
}
sweep_adamw() {
  for lr in ${ADAMW_LRS-0.001 0.003 0.01}; do run "adamw-$lr" --optimizer adamw --adam-lr "$lr"; done
}
sweep_muonh & sweep_adamw & wait
/usr/bin/python3 scripts/plot_experiment.py "$D" "${PLOT:-docs/img/muonh_vs_adamw.png}"
