#!/usr/bin/env bash
# items/s of a 4-shot gsm8k-style generate_until task on cpu-small (docs/benchmarks.md,
# "Downstream tasks: generate_until"), at each --gen-batch given (default: 1 and 32).
#
#   bench/generate_until.sh [BUILD_DIR] [WORK_DIR] [GEN_BATCH ...]
#
# The task file is the project's own, in the harness's format and with the fields of the
# harness's gsm8k.yaml (until, the two filters, exact_match's options); the data are 20 train and
# 24 test synthetic word problems in gsm8k's question/answer form, laid out as the Hub lays them
# out (--dataset-root). The model is untrained (`marin init --preset cpu-small --seed 1`), so it
# never writes a stop string: every item generates max_gen_toks (256) tokens, the worst case.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$src/build}")
work=${2:-$(mktemp -d /tmp/generate_until.XXXXXX)}
shift $(($# < 2 ? $# : 2))
batches=("$@")
((${#batches[@]})) || batches=(1 32)
marin="$build/bin/marin"
mkdir -p "$work/tasks"

[ -d "$work/model" ] || "$marin" init --preset cpu-small --seed 1 --out "$work/model" >/dev/null
[ -f "$work/tok.json" ] || "$marin" tokenizer train --vocab-size 2048 \
  --in "$src/data/fixture/bible_kjv/train-00000.jsonl" --out "$work/tok.json" >/dev/null

cat >"$work/tasks/gsm8k_style.yaml" <<'YAML'
task: gsm8k_style
dataset_path: local/gsm8k_style
dataset_name: main
output_type: generate_until
training_split: train
fewshot_split: train
test_split: test
doc_to_text: "Question: {{question}}\nAnswer:"
doc_to_target: "{{answer}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\$", "(?s).*#### ", "\\.$"]
generation_kwargs:
  until: ["Question:", "</s>", "<|im_end|>"]
  do_sample: false
  temperature: 0.0
repeats: 1
num_fewshot: 4
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\-?[0-9\\.\\,]+)"
      - function: take_first
  - name: flexible-extract
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{2,})|(-?[0-9]+)"
      - function: take_first
metadata:
  version: 3.0
YAML

/usr/bin/python3 - "$work/data/local/gsm8k_style/main" <<'PY'
import json, os, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
names = ["Ruth", "Aaron", "Miriam", "Caleb", "Deborah", "Gideon", "Hannah", "Jonah"]
goods = ["loaves", "sheep", "talents", "measures of oil", "figs", "cubits of linen"]
def problem(i):
    a, b, c = 3 + i % 7, 12 + 5 * (i % 9), 2 + i % 4
    n, g = names[i % len(names)], goods[i % len(goods)]
    q = (f"{n} has {b} {g}. {n} buys {a} more each day for {c} days, then gives away half of "
         f"what there is. How many {g} does {n} have left?")
    total = b + a * c
    ans = (f"Each day adds {a}, so {c} days add {a}*{c} = <<{a}*{c}={a*c}>>{a*c}. "
           f"Then {b}+{a*c} = <<{b}+{a*c}={total}>>{total}. Half of that is "
           f"{total}/2 = <<{total}/2={total/2:g}>>{total/2:g}.\n#### {total/2:g}")
    return {"question": q, "answer": ans}
for split, lo, n in (("train", 0, 20), ("test", 100, 24)):
    with open(os.path.join(d, f"{split}-00000-of-00001.jsonl"), "w") as f:
        for i in range(lo, lo + n):
            f.write(json.dumps(problem(i)) + "\n")
PY

grep -m1 "model name" /proc/cpuinfo
for b in "${batches[@]}"; do
  start=$(date +%s.%N)
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} "$marin" eval --checkpoint "$work/model" \
    --tokenizer "$work/tok.json" --tasks gsm8k_style --task-dir "$work/tasks" \
    --dataset-root "$work/data" --no-audit --quiet --threads "${THREADS:-1}" --gen-batch "$b" \
    --json "$work/result-$b.json" >"$work/log-$b.txt"
  end=$(date +%s.%N)
  python3 - "$work/result-$b.json" "$b" "$start" "$end" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["results"]["gsm8k_style"]
n, wall = t["sample_len"] if "sample_len" in t else 24, float(sys.argv[4]) - float(sys.argv[3])
print(f"--gen-batch {sys.argv[2]:>3}: {n} items in {wall:.1f} s (whole command): "
      f"{n / wall:.2f} items/s; exact_match {t.get('exact_match,strict-match')}")
PY
done
