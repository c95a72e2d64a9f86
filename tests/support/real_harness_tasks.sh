#!/bin/bash
# The 14 real harness tasks of issue 40, run unmodified from a copy of the harness's task tree
# over synthetic local data (tests/support/harness_task_data.py), each checked to report every metric of
# its metric_list under every filter of its filter_list; mmlu as a group over all its subjects
# and over one subject per category. Prints the table of docs/evaluation.md.
#
#   tests/support/real_harness_tasks.sh HARNESS_TASKS_DIR [BUILD_DIR] [WORK_DIR]
# HARNESS_TASKS_DIR: lm_eval/tasks of an lm-evaluation-harness checkout (never committed here).
set -euo pipefail
tasks_dir=$(realpath "$1")
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "${2:-$src/build}")
work=${3:-$(mktemp -d /tmp/real_harness_tasks.XXXXXX)}
mkdir -p "$work"
marin="$build/bin/marin"

# A tiny model; seq_len 512 leaves room for generate_until's max_gen_toks (256 by default: the
# harness refuses max_gen_toks >= the model's length, and so does marin).
"$marin" init --preset tiny --set seq_len=512 --seed 1 --out "$work/model" >/dev/null
"$marin" tokenizer train --vocab-size 512 --in "$src/data/fixture/bible_kjv/train-00000.jsonl" \
  --out "$work/tok.json" >/dev/null
subjects=$(ls "$tasks_dir/mmlu/default" | sed -n 's/^mmlu_\(.*\)\.yaml$/\1/p')
rm -rf "$work/data"
/usr/bin/python3 "$src/tests/support/harness_task_data.py" "$work/data" $subjects

# mmlu over the subjects present: the group files and one subject of each category.
few="$work/mmlu-few"
rm -rf "$few" && mkdir -p "$few"
cp "$tasks_dir"/mmlu/default/_* "$few/"
for cat in stem other social_sciences humanities; do
  cp "$(grep -l "\"tag\": \"mmlu_${cat}_tasks\"" "$tasks_dir"/mmlu/default/mmlu_*.yaml | head -1)" "$few/"
done

run() {  # NAME TASK_DIR
  "$marin" eval --checkpoint "$work/model" --tokenizer "$work/tok.json" --tasks "$1" \
    --task-dir "$2" --dataset-root "$work/data" --trust-task-code --no-audit \
    --json "$work/$1.$(basename "$2").json" >"$work/$1.$(basename "$2").log" 2>&1
}
status=0
for t in arc_easy arc_challenge hellaswag piqa winogrande boolq lambada_openai openbookqa sciq \
  copa truthfulqa_mc1 triviaqa gsm8k mmlu; do
  run "$t" "$tasks_dir" || { echo "$t: FAILED: $(tail -n 1 "$work/$t.$(basename "$tasks_dir").log")"; status=1; }
done
run mmlu "$few" || { echo "mmlu (few): FAILED: $(tail -n 1 "$work/mmlu.mmlu-few.log")"; status=1; }

/usr/bin/python3 - "$tasks_dir" "$work" <<'PY' || status=1
import glob, json, os, sys
import yaml

tasks_dir, work = sys.argv[1:3]
# metric_list and filter_list as the harness reads them (include: first listed wins, own keys
# win), from the task files themselves.
class L(yaml.SafeLoader):
    pass
L.add_multi_constructor("!", lambda loader, suffix, node: None)

def config(path):
    with open(path) as f:
        c = yaml.load(f, L) or {}
    inc = c.pop("include", None)
    merged = {}
    for i in reversed([inc] if isinstance(inc, str) else inc or []):
        merged.update(config(os.path.join(os.path.dirname(path), i)))
    merged.update(c)
    return merged

files = {}
for p in glob.glob(os.path.join(tasks_dir, "**", "*.yaml"), recursive=True):
    try:
        with open(p) as f:
            name = (yaml.load(f, L) or {}).get("task")
    except Exception:
        continue
    if isinstance(name, str):
        files.setdefault(name, p)

print("| task | ran | metrics reported (`metric,filter`) |")
print("|---|---|---|")
ok = True
tree = os.path.basename(tasks_dir)
for t in ["arc_easy", "arc_challenge", "hellaswag", "piqa", "winogrande", "boolq",
          "lambada_openai", "openbookqa", "sciq", "copa", "truthfulqa_mc1", "triviaqa", "gsm8k"]:
    out = os.path.join(work, f"{t}.{tree}.json")
    if not os.path.exists(out):
        print(f"| {t} | no | |"); ok = False; continue
    r = json.load(open(out))["results"][t]
    c = config(files[t])
    filters = [f["name"] for f in c.get("filter_list") or []] or ["none"]
    want = {f"{m['metric']},{f}" for m in c["metric_list"] for f in filters}
    have = {k for k in r if "," in k and "_stderr," not in k}
    stderr = {k.replace("_stderr,", ",") for k in r if "_stderr," in k}
    good = want == have == stderr
    ok &= good
    print(f"| {t} | {'yes' if good else 'MISSING ' + str(sorted(want - have))} | "
          + ", ".join(f"`{k}` {r[k]:.4g}" for k in sorted(have)) + " |")
for run, label in ((tree, "all 57 subjects"), ("mmlu-few", "one subject per category")):
    out = os.path.join(work, f"mmlu.{run}.json")
    if not os.path.exists(out):
        print(f"| mmlu ({label}) | no | |"); ok = False; continue
    j = json.load(open(out))
    g = j["groups"]["mmlu"]
    leaves = [k for k in j["results"] if k.startswith("mmlu_") and k not in j["groups"]]
    good = "acc,none" in g and all("acc,none" in j["results"][k] for k in leaves)
    ok &= good
    print(f"| mmlu ({label}) | {'yes' if good else 'no'} | group `acc,none` {g['acc,none']:.4g} "
          f"± {g['acc_stderr,none']:.4g} over {g['sample_len']} items of {len(leaves)} tasks; "
          f"each subject `acc,none` |")
sys.exit(0 if ok else 1)
PY
exit $status
