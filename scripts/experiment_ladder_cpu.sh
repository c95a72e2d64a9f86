#!/usr/bin/env bash
# docs/experiments.md (issue 6): the CPU ladder on the full corpus, the pre-registered forecast,
# and the target run scored against it. Every step is skipped when its output exists, so the
# script can be rerun after an interruption. Needs the full corpus in corpus/ (docs/corpus.md).
# Usage: scripts/experiment_ladder_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
B=${MARIN:-build/bin/marin}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
[ -f corpus/manifest.json ] || { echo "no corpus/: scripts/fetch_corpus.sh && $B corpus build --out corpus" >&2; exit 1; }
mkdir -p runs/full
if [ ! -f runs/full/tokenizer.json ]; then
  /usr/bin/python3 scripts/sample_corpus.py corpus 2000000 > runs/full/tok_sample.jsonl
  $B tokenizer train --vocab-size 8192 --in runs/full/tok_sample.jsonl --out runs/full/tokenizer.json
fi
[ -f runs/full/tokens/manifest.json ] ||
  $B tokenize --tokenizer runs/full/tokenizer.json --corpus corpus --out runs/full/tokens
# The rungs, then their macro-loss curves from the kept checkpoints (resumable).
$B ladder --config configs/ladder_cpu.toml --out runs/ladder-cpu
# The pre-registration: written once, before the target starts (forecast refuses to overwrite).
[ -f runs/forecast-cpu.json ] ||
  $B forecast --ladder runs/ladder-cpu --config configs/ladder_cpu_target.toml --target-batch 8 \
    --out runs/forecast-cpu.json --plot docs/img/forecast_cpu.png
# The target: the family's next member, 6.6x the largest rung's compute, same mixture and metric.
target=(--config configs/ladder_cpu_target.toml --data configs/corpus_mixture.toml
        --token-dir runs/full/tokens --tokenizer runs/full/tokenizer.json --batch 8 --seed 0
        --forecast runs/forecast-cpu.json)
if [ -d runs/target-cpu/checkpoints ]; then
  $B train --resume runs/target-cpu
else
  steps=$(/usr/bin/python3 -c 'import json; print(json.load(open("runs/forecast-cpu.json"))["inputs"]["target"]["steps"])')
  $B train "${target[@]}" --steps "$steps" --out runs/target-cpu
fi
/usr/bin/python3 scripts/plot_forecast.py runs/forecast-cpu.json docs/img/forecast_cpu.png \
  --actual runs/target-cpu/metrics.jsonl
