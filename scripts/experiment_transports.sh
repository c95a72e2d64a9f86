#!/usr/bin/env bash
# docs/experiments.md, "Transports at CPU scale": the 535B run's A/B in one process on the fixture
# mixture — dropless, capacity (recipe §8) and pooled (the 535B run's waves) over the same tokens, and
# a run that switches pooled → dropless half way from the pooled run's checkpoint (as the 535B run did
# at step 81,716) against the pooled run that stays. Resumable: finished runs are kept.
# With NP=N EP=P the runs are expert-parallel under mpirun (N ranks, experts split over P: the
# pooled transport then has S = P shards, with sender and receiver drops).
# Usage: [EXP_DIR=runs/exp-transport] [PRESET=tiny] [NP=1 EP=1] scripts/experiment_transports.sh [STEPS] [BATCH]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${MARIN:-build/bin/marin}
NP=${NP:-1}
EP=${EP:-1}
if ((NP > 1)); then
  B="mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np $NP $B"
fi
D=${EXP_DIR:-runs/exp-transport}
STEPS=${1:-400}
BATCH=${2:-16}
HALF=$((STEPS / 2))
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$D"
M=${MARIN:-build/bin/marin}  # the data preparation runs in one process
[ -f "$D/tokenizer.json" ] || $M tokenizer train --vocab-size 512 --in data/fixture/*/train-*.jsonl --out "$D/tokenizer.json"
[ -f "$D/tokens/manifest.json" ] || $M tokenize --tokenizer "$D/tokenizer.json" --corpus data/fixture --out "$D/tokens"
common=(--preset "${PRESET:-tiny}" --data configs/fixture_mixture.toml --token-dir "$D/tokens"
        --tokenizer "$D/tokenizer.json" --batch "$BATCH" --steps "$STEPS" --seed 1
        --eval-every $((STEPS / 10)) --eval-batches 8 --ep "$EP")
done_at() { [ -d "$D/$1/checkpoints/step-$(printf %08d "$STEPS")" ]; }
run() {  # name, extra args...
  local name=$1; shift
  done_at "$name" && return
  rm -rf "${D:?}/$name"
  $B train "${common[@]}" "$@" --out "$D/$name" 2>"$D/$name.log" >/dev/null
}
run dropless --transport dropless
run capacity --transport capacity
run pooled --transport pooled --waves 3 --keep-every "$HALF"
if ! done_at switched; then
  rm -rf "${D:?}/switched"
  $B train --fork-from "$D/pooled/checkpoints/step-$(printf %08d "$HALF")" --transport dropless \
    --ep "$EP" --out "$D/switched" 2>"$D/switched.log" >/dev/null
fi
/usr/bin/python3 - "$D" "$HALF" <<'PY'
import json, sys
d, half = sys.argv[1], int(sys.argv[2])
def load(name):
    return [json.loads(l) for l in open(f"{d}/{name}/metrics.jsonl")]
def mean(xs):
    xs = list(xs); return sum(xs) / len(xs) if xs else float("nan")
out = {}
for name in ["dropless", "capacity", "pooled", "switched"]:
    m = load(name)
    drops = [mean(l["drop_fraction"] for l in s["router"]) for s in m if "router" in s]
    snd = [mean(l.get("sender_drop_fraction", 0) for l in s["router"]) for s in m if "router" in s]
    rcv = [mean(l.get("receiver_drop_fraction", 0) for l in s["router"]) for s in m if "router" in s]
    valid = [s["valid_ce"] for s in m if "valid_ce" in s]
    out[name] = {"steps": len(m), "mean_drop_fraction": mean(drops),
                 "mean_sender_drop_fraction": mean(snd), "mean_receiver_drop_fraction": mean(rcv),
                 "final_valid_ce": valid[-1] if valid else None,
                 "mean_loss_second_half": mean(s["loss"] for s in m if s["step"] >= half)}
p, s = load("pooled"), load("switched")
ps = {x["step"]: x["loss"] for x in p}
diff = [x["loss"] - ps[x["step"]] for x in s if x["step"] in ps]
out["switch_minus_pooled"] = {"mean_loss_diff_second_half": mean(diff),
                              "final_valid_ce_diff": out["switched"]["final_valid_ce"] - out["pooled"]["final_valid_ce"]}
json.dump(out, open(f"{d}/summary.json", "w"), indent=2)
print(json.dumps(out, indent=2))
PY
