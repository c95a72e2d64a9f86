#!/usr/bin/env bash
# The 535B run's expert mesh, rehearsed on one machine (issue 43; docs/distributed.md,
# "The 535B mesh, rehearsed"):
#   scripts/rehearse_mesh.sh [OUT]               # 64 ranks, --ep 64: 6 of 384 experts a rank
#   RANKS=16 scripts/rehearse_mesh.sh [OUT]      # the smaller mesh CI runs (24 experts a rank)
# A test-sized model with the run's 384 routed experts (8 active) trains under
# `mpirun -np RANKS --oversubscribe` with --ep RANKS, the pooled transport in 3 waves and sharded
# checkpoints every 2 steps. Then:
#   1. every layer's per-wave capacities in metrics.jsonl equal `marin plan`'s for that mesh;
#   2. a rank is SIGKILLed after step 5: the job ends, step 4 stays the latest checkpoint;
#   3. the run resumes at RANKS/2 ranks (--ep RANKS/2: the checkpoint reshards), its capacities
#      again equal the plan's for the new mesh, and SIGUSR1 to mpirun (a scheduler's warning)
#      stops it with a checkpoint after step 8 or later;
#   4. it resumes at RANKS/2 ranks switched to the dropless transport (recorded in the lineage)
#      and runs to step 12 without a dropped assignment.
# Exits non-zero, naming the check, when anything differs. Needs build/bin/marin (BIN=...).
set -euo pipefail
cd "$(dirname "$0")/.."
RANKS=${RANKS:-64}
HALF=$((RANKS / 2))
BIN=${BIN:-$PWD/build/bin/marin}
OUT=${1:-runs/mesh-rehearsal-$RANKS}
PY=/usr/bin/python3
MODEL=(--preset tiny --set num_experts=384 --set top_k=8)
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
RUN=$OUT/run
say() { printf '\n== %s\n' "$*"; }
die() { printf 'rehearse_mesh: %s\n' "$*" >&2; exit 1; }

rm -rf "$OUT" && mkdir -p "$OUT"
say "data: the fixture corpus, a 512-token tokenizer, rows of 64 tokens"
"$BIN" tokenizer train --vocab-size 512 --in data/fixture/*/train-*.jsonl --out "$OUT/tokenizer.json" >/dev/null
"$BIN" rows --in data/fixture/*/train-*.jsonl --tokenizer "$OUT/tokenizer.json" --seq-len 64 \
  --max-rows $((RANKS * 12)) --out "$OUT/rows.bin" >/dev/null

# The plan's per-wave capacities for RANKS ranks each computing one micro-batch of one row.
plan() {
  "$BIN" plan "${MODEL[@]}" --cluster configs/cluster/gb200-nvl72.toml --gpus-per-rack "$1" \
    --ep "$1" --waves 3 --batch "$1" --json >"$OUT/plan-$1.json"
}
# Checks every layer of metrics steps [from, to] against plan-$1.json.
check_capacities() {
  $PY - "$OUT/plan-$1.json" "$RUN/metrics.jsonl" "$2" "$3" <<'PY'
import json, sys
pooled = json.load(open(sys.argv[1]))["cluster"]["pooled"]
lo, hi = int(sys.argv[3]), int(sys.argv[4])
seen = 0
for line in open(sys.argv[2]):
    m = json.loads(line)
    if not lo <= m["step"] <= hi:
        continue
    for l, r in enumerate(m["router"]):
        for key in ("sender_rows_per_wave", "receiver_rows_per_wave"):
            if r.get(key) != pooled[key]:
                sys.exit(f"step {m['step']} layer {l}: {key} = {r.get(key)}, marin plan says {pooled[key]}")
        seen += 1
if seen == 0:
    sys.exit(f"no metrics lines for steps {lo}-{hi}")
print(f"steps {lo}-{hi}: {seen} layer-steps used sender {pooled['sender_rows_per_wave']} and "
      f"receiver {pooled['receiver_rows_per_wave']} rows per wave, as marin plan says "
      f"({pooled['shards']} shards, {pooled['local_experts']} experts a rank)")
PY
}
steps_done() { [ -f "$RUN/metrics.jsonl" ] && wc -l <"$RUN/metrics.jsonl" || echo 0; }
wait_for_step() {  # $1: step, $2: pid of the job
  for _ in $(seq 1 1200); do
    [ "$(steps_done)" -ge "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || die "the job ended before step $1"
    sleep 0.5
  done
  die "no step $1 after 10 minutes"
}
rank_pid() {  # the marin process of rank $1 of this run
  for p in $(pgrep -f -- "$BIN train .*$RUN"); do
    { tr '\0' '\n' <"/proc/$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=$1"; } 2>/dev/null &&
      { echo "$p"; return; }
  done
}
latest_step() { readlink "$RUN/checkpoints/latest" | sed 's/step-0*//'; }

say "1-2. $RANKS ranks, --ep $RANKS, pooled in 3 waves; rank $((RANKS - 1)) is killed after step 5"
plan "$RANKS"
"${MPI[@]}" -np "$RANKS" "$BIN" train "${MODEL[@]}" --batch "$RANKS" --micro-batch 1 --steps 12 \
  --ep "$RANKS" --transport pooled --waves 3 --ckpt-format sharded --ckpt-every 2 \
  --rows "$OUT/rows.bin" --out "$RUN" >"$OUT/phase1.log" 2>&1 &
job=$!
wait_for_step 1 "$job"
victim=$(rank_pid $((RANKS - 1)))
[ -n "$victim" ] || die "rank $((RANKS - 1)) not found"
wait_for_step 5 "$job"
kill -KILL "$victim"
if wait "$job"; then die "the job survived a killed rank"; fi
check_capacities "$RANKS" 1 4
[ "$(latest_step)" = 4 ] || die "latest checkpoint is step $(latest_step), expected 4"
echo "the job ended; the latest checkpoint is step 4 ($(ls "$RUN/checkpoints/step-00000004" | grep -c '^shard-') shards)"

say "3. resumed at $HALF ranks, --ep $HALF (resharded); SIGUSR1 to mpirun after step 8"
plan "$HALF"
"${MPI[@]}" -np "$HALF" "$BIN" train --resume "$RUN" --ep "$HALF" >"$OUT/phase2.log" 2>&1 &
job=$!
wait_for_step 8 "$job"
kill -USR1 "$job"
wait "$job" || die "the run did not stop cleanly on SIGUSR1 (see $OUT/phase2.log)"
stopped=$(latest_step)
[ "$stopped" -ge 8 ] || die "latest checkpoint is step $stopped, expected 8 or later"
check_capacities "$HALF" 5 "$stopped"
echo "stopped with the checkpoint of step $stopped"

say "4. resumed at $HALF ranks, switched to dropless, to step 12"
"${MPI[@]}" -np "$HALF" "$BIN" train --resume "$RUN" --ep "$HALF" --transport dropless \
  >"$OUT/phase3.log" 2>&1 || die "the dropless resume failed (see $OUT/phase3.log)"
$PY - "$RUN" "$stopped" <<'PY'
import json, sys
run, stopped = sys.argv[1], int(sys.argv[2])
lines = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
if [m["step"] for m in lines] != list(range(1, 13)):
    sys.exit(f"metrics steps {[m['step'] for m in lines]}, expected 1-12 once each")
for m in lines[stopped:]:
    if any(r["drop_fraction"] != 0 for r in m["router"]):
        sys.exit(f"step {m['step']}: the dropless transport dropped assignments")
state = json.load(open(f"{run}/checkpoints/latest/state.json"))
if state["options"]["transport"] != "dropless" or state["format"] != "sharded":
    sys.exit("the final checkpoint is not a sharded dropless one")
print(f"steps {stopped + 1}-12 dropless, no drops; final loss {lines[-1]['loss']:.4f}; "
      f"lineage {json.dumps(state['lineage'])}")
PY
say "the mesh rehearsal passed ($RANKS ranks, then $HALF)"
