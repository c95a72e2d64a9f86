#!/usr/bin/env python3
"""Writes the committed seed corpus fuzz/corpus/<target>/ (a few small valid and near-valid
inputs per parser; libFuzzer mutates from these). Run from the repository root with the
inputs a real run produced: `fuzz/write_seeds.py RUN_CKPT_DIR TOKENIZER_JSON`, where
RUN_CKPT_DIR is a checkpoint of `marin train --preset tiny` (its config.json, state.json) and
TOKENIZER_JSON a small `marin tokenizer train` output; the run's own metrics.jsonl and run.json
(RUN_CKPT_DIR/../..) seed fuzz_report_run, and scripts/render_tasks.py (Debian's python3-jinja2,
python3-yaml) renders fuzz_task_items' seeds. Re-running it rewrites the seeds."""
import base64, json, os, struct, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
ckpt, tok_json = sys.argv[1], sys.argv[2]


def put(target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, meta=None, dtype="F32", pad=b""):
    header, body = {}, b""
    for name, shape, values in tensors:
        raw = struct.pack("<%df" % len(values), *values)
        if dtype == "BF16":
            raw = b"".join(raw[i + 2:i + 4] for i in range(0, len(raw), 4))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode() + pad
    return struct.pack("<Q", len(h)) + h + body


put("fuzz_safetensors", "f32", safetensors([("a", [2], [1.0, -2.0]), ("b.c", [1, 2], [0.5, 3.0])], {"format": "pt"}))
put("fuzz_safetensors", "bf16", safetensors([("w", [2, 2], [1.0, 2.0, 3.0, 4.0])], dtype="BF16"))
put("fuzz_safetensors", "scalar_padded", safetensors([("s", [], [7.0])], pad=b"   "))
put("fuzz_safetensors", "offsets_wrong", safetensors([("a", [3], [1.0, 2.0])]))

config = open(os.path.join(ckpt, "config.json")).read()
put("fuzz_config_json", "tiny", config)
cj = json.loads(config)
cj["kv_heads_local"] = 3
put("fuzz_config_json", "bad_rule", json.dumps(cj))
put("fuzz_config_json", "partial", json.dumps({"hidden_dim": 64, "num_layers": 2}))
# Findings of CI's fuzzing, kept as regressions: a number past a double's range (nlohmann's 406).
put("fuzz_config_json", "number_overflow", '{"hidden_dim": 200E00000733}')

toml_lines = []
for k, v in json.loads(config).items():
    if isinstance(v, list):
        toml_lines.append("%s = [%s]" % (k, ", ".join('"%s"' % s for s in v)))
    elif isinstance(v, (int, float)):
        toml_lines.append("%s = %r" % (k, v))
put("fuzz_config_toml", "tiny", "\n".join(toml_lines) + "\n")  # even first byte: no preset
put("fuzz_config_toml", "model_table", "[model]\nhidden_dim = 128\nnum_layers = 2\n[train]\nsteps = 5\n")
put("fuzz_config_toml", "preset_partial", "# preset fills the rest\nnum_experts = 16\ntop_k = 4\n")

put("fuzz_mixture_toml", "weights", "weights = { bible_kjv = 0.7, code_go = 0.3 }\n")
put("fuzz_mixture_toml", "phases",
    "[sources]\nkjv = { domain = 'bible_kjv', split = 'train' }\nweb = 'bible_web_modern'\n"
    "[[phase]]\nweights = { kjv = 1, web = 1 }\n[[phase]]\nstart_fraction = 0.5\nweights = { kjv = 1 }\n")
put("fuzz_mixture_toml", "bad_weight", "weights = { a = -1, b = inf }\n")
with open(os.path.join(os.path.dirname(root), "..", "configs", "fixture_mixture.toml")) as f:
    put("fuzz_mixture_toml", "fixture", f.read())

put("fuzz_ladder_toml", "small",
    "[ladder]\nname = 'x'\nwidths = [64, 96]\nlayers = [2, 3]\ntokens_per_param = 2.0\nseed = 1\n"
    "[batch]\nbase = 8\nbase_width = 64\nexponent = 0.5\nmultiple = 2\n"
    "[family]\nhead_dim = 16\nnum_experts = 8\ntop_k = 2\nseq_len = 64\nsliding_window = 32\n"
    "vocab_size = 512\n[rung.d96]\nnum_experts = 16\n")
with open(os.path.join(os.path.dirname(root), "..", "configs", "ladder_cpu.toml")) as f:
    put("fuzz_ladder_toml", "ladder_cpu", f.read())
put("fuzz_ladder_toml", "mismatch", "[ladder]\nwidths = [64]\nlayers = [2, 3]\n")

tok = open(tok_json).read()
put("fuzz_tokenizer_json", "trained", tok)
tj = json.loads(tok)
tj["model"]["merges"] = tj["model"]["merges"][:3] + ["zz yy"]
put("fuzz_tokenizer_json", "bad_merge", json.dumps(tj))

byte_lines = [base64.b64encode(bytes([b])).decode() + " %d" % b for b in range(256)]
merges = [b"th", b"he", b"the", b"in", b" the"]
tik = "\n".join(byte_lines + [base64.b64encode(m).decode() + " %d" % (256 + i) for i, m in enumerate(merges)]) + "\n"
put("fuzz_tiktoken", "bytes_and_merges", tik)
put("fuzz_tiktoken", "missing_byte", "\n".join(byte_lines[1:]) + "\n")
put("fuzz_tiktoken", "bad_rank", "YQ== 0\nYg== x\n")
put("fuzz_tiktoken", "huge_rank", "YQ== 0\nYg== 999999999\n")  # once sized a 2 GB table

HASH = 0x5EED


def shard(vocab, docs, text_bytes, width=None, tail=b""):
    width = width or (2 if vocab <= 65536 else 4)
    toks = [t for d in docs for t in d]
    offs = [0]
    for d in docs:
        offs.append(offs[-1] + len(d))
    h = b"MARINTOK" + struct.pack("<III", 1, width, vocab) + b"\0" * 4
    h += struct.pack("<QQQQ", HASH, len(docs), len(toks), text_bytes) + b"\0" * 8
    body = struct.pack("<%dQ" % len(offs), *offs)
    body += struct.pack("<%d%s" % (len(toks), "H" if width == 2 else "I"), *toks)
    return h + body + tail


put("fuzz_token_shard", "two_docs", shard(300, [[1, 2], [3, 299, 0]], 11))
put("fuzz_token_shard", "wide", shard(70000, [[69999, 5]], 3))
put("fuzz_token_shard", "empty", shard(300, [], 0))
put("fuzz_token_shard", "trailing", shard(300, [[1]], 1, tail=b"\0\0"))

manifest = {"format": "marin-tokens/1", "tokenizer_hash": "%016x" % HASH, "vocab_size": 300,
            "corpus": "c", "shards": [{"file": "d/train-00000.tok", "domain": "d", "split": "train",
                                        "documents": 2, "tokens": 5, "bytes": 11}]}
put("fuzz_token_manifest", "one_shard", json.dumps(manifest, indent=1))
m2 = json.loads(json.dumps(manifest))
m2["shards"].append(dict(m2["shards"][0], file="./d/train-00000.tok"))
put("fuzz_token_manifest", "duplicate", json.dumps(m2))
m3 = json.loads(json.dumps(manifest))
m3["shards"][0]["tokens"] = 6
m3["shards"][0]["file"] = "../d/train-00000.tok"
put("fuzz_token_manifest", "lying_escaping", json.dumps(m3))

put("fuzz_rows", "seq4_two_rows", bytes([3]) + struct.pack("<10I", *range(10)))
put("fuzz_rows", "seq1", bytes([0]) + struct.pack("<4I", 1, 2, 511, 0))
put("fuzz_rows", "out_of_vocab", bytes([1]) + struct.pack("<3I", 1, 2, 512))
put("fuzz_rows", "ragged", bytes([2]) + struct.pack("<5I", 1, 2, 3, 4, 5))

state = open(os.path.join(ckpt, "state.json")).read()
put("fuzz_state_json", "real", state)
sj = json.loads(state)
sj["data"]["next_row"] = -1000
put("fuzz_state_json", "edited", json.dumps(sj))  # checksum no longer matches
sj.pop("state_xxh64", None)
put("fuzz_state_json", "no_checksum", json.dumps(sj))


def curve(scale):
    return [{"fraction": k / 20, "step": k, "compute": scale * k, "loss": 2.0 + 3.0 / (scale * k) ** 0.3,
             "clean_loss": 2.1 + 3.0 / (scale * k) ** 0.3} for k in range(1, 21)]


ladder = {"format": "marin-ladder-v1", "ladder": {"name": "x", "tokens_per_param": 2.0},
          "metric": "valid_ce",
          "rungs": [{"name": "r%d" % i, "status": "done", "compute_per_step": 1e9 * s, "steps": 20,
                     "batch": 8, "active_params": 1e6 * s, "curve": curve(1e9 * s)} for i, s in enumerate([1, 3, 9])]}
put("fuzz_ladder_json", "three_rungs", json.dumps(ladder))
l2 = json.loads(json.dumps(ladder))
l2["rungs"][1]["status"] = "pending"
put("fuzz_ladder_json", "unfinished", json.dumps(l2))
l3 = json.loads(json.dumps(ladder))
l3["rungs"][0]["curve"] = l3["rungs"][0]["curve"][:3]
put("fuzz_ladder_json", "short_curve", json.dumps(l3))

fits = [{"fraction": k / 20, "predicted_loss": 3.0 - k / 40, "predicted_clean_loss": 3.1 - k / 40} for k in range(1, 21)]
forecast = {"format": "marin-forecast-v1", "inputs": {"target": {"steps": 100, "batch": 8}}, "fits": fits,
            "prediction": {"final_loss": 2.5, "metric": "valid_ce"}}
put("fuzz_forecast_json", "full", json.dumps(forecast))
f2 = json.loads(json.dumps(forecast))
f2["inputs"]["target"]["steps"] = 50
put("fuzz_forecast_json", "other_steps", json.dumps(f2))
put("fuzz_forecast_json", "partial", json.dumps({"format": "marin-forecast-v1", "inputs": {"target": {"steps": 100}},
                                                  "fits": [{"fraction": 1.0, "predicted_loss": None}]}))
# Found by fuzz_forecast_json (CI run, 2026-12-01): a "format" that is not a string threw
# nlohmann's type_error from value("format", "") instead of a refusal. Kept as a regression seed.
put("fuzz_forecast_json", "format_object", json.dumps({"format": {"target": {"steps": 100}},
                                                       "uits": [{"fraction": 1.4, "predicted_los|s": None}]}))

put("fuzz_corpus_jsonl", "two_docs", 'train-00000.jsonl\n{"id":"a","text":"In the beginning."}\n\n{"text":"caf\\u00e9"}\n')
put("fuzz_corpus_jsonl", "bad_utf8", b'{"text":"caf\xe9"}\n')
put("fuzz_corpus_jsonl", "not_object", '["text"]\n{"text": 1}\n')

cm = {"format": "marin-corpus-v1", "domains": {"d": {"shards": [
    {"file": "d/train-00000.jsonl", "split": "train", "documents": 1, "text_bytes": 1, "file_bytes": 13,
     "xxh64": "0123456789abcdef"}]}}}
put("fuzz_corpus_manifest", "one_shard", json.dumps(cm))
c2 = json.loads(json.dumps(cm))
c2["domains"]["d"]["shards"].append(dict(c2["domains"]["d"]["shards"][0], file="d/./train-00000.jsonl"))
put("fuzz_corpus_manifest", "duplicate", json.dumps(c2))
c3 = json.loads(json.dumps(cm))
c3["domains"]["d"]["shards"][0]["xxh64"] = "XYZ"
c3["domains"]["e"] = {"shards": [{"file": "/abs/train-00000.jsonl"}]}
put("fuzz_corpus_manifest", "bad_hex_abs", json.dumps(c3))

# Pre-tokenized imports (fuzz_token_import): files written by scripts/write_token_files.py, the way
# llm.c and Megatron-LM write them. Byte 0 even: an llm.c file; odd: u32 .idx length, .idx, .bin.
# The target's tokenizer has 262 ids: BOS 259, EOS 260.
import importlib.util, tempfile
spec = importlib.util.spec_from_file_location(
    "write_token_files", os.path.join(os.path.dirname(root), "..", "scripts", "write_token_files.py"))
wtf = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(wtf)  # needs numpy, which Debian's /usr/bin/python3 has
except ImportError as e:
    sys.exit(f"write_seeds.py: fuzz_token_import's seeds need numpy ({e}); run with /usr/bin/python3")
docs = [[116, 104, 101], [], [99, 97, 116, 32, 115]]
with tempfile.TemporaryDirectory() as tmp:
    for name, version, delim in [("llmc_v1", 1, 260), ("llmc_v7", 7, 259)]:
        f = os.path.join(tmp, name)
        wtf.write_llmc(f, docs, version, delim, 0)
        put("fuzz_token_import", name, b"\0" + open(f, "rb").read())
    for name, dtype, eod, sentences in [("megatron_int32_eod", "int32", True, 1),
                                        ("megatron_uint16_sentences", "uint16", False, 2)]:
        f = os.path.join(tmp, name)
        wtf.write_megatron(f, docs, dtype, eod, 260, sentences)
        idx, bin_ = open(f + ".idx", "rb").read(), open(f + ".bin", "rb").read()
        put("fuzz_token_import", name, b"\1" + struct.pack("<I", len(idx)) + idx + bin_)
# The document seam's JSONL reader behind gzip/zstd (fuzz_sources_jsonl): first byte = options.
import gzip, subprocess
lines = b'{"id":"a","text":"one"}\n\n{"text":null}\n{"meta":{"body":"two"}}\n[1]\n'
put("fuzz_sources_jsonl", "plain", b"\x00" + lines)
put("fuzz_sources_jsonl", "nested", b"\x01" + lines)
put("fuzz_sources_jsonl", "gzip_two_members", b"\x00" + gzip.compress(lines) + gzip.compress(lines))
zst = subprocess.run(["zstd", "-c", "-q"], input=lines, capture_output=True, check=True).stdout
put("fuzz_sources_jsonl", "zstd_two_frames", b"\x01" + zst + zst)
put("fuzz_sources_jsonl", "zstd_truncated", b"\x02" + zst[: len(zst) // 2])

# The document seam's text reader (fuzz_sources_text): byte 0 = options, then the file's bytes.
text = "In the beginning God created the heaven and the earth.\n".encode()
put("fuzz_sources_text", "plain", b"\x00" + text)
put("fuzz_sources_text", "gzip", b"\x02" + gzip.compress(text))
put("fuzz_sources_text", "zstd_small_limit", b"\x05" + zst)
put("fuzz_sources_text", "nul_byte", b"\x00" + text + b"\x00")

# The JSONL fast path against the rule (fuzz_jsonl_fast): byte 0 = text field, then one line.
fast_lines = {
    "plain": b'{"id":"a","text":"one \\u00e9 \\ud83d\\ude00"}',
    "nested": b'{"meta":{"body":"two","n":[1,2.5,null,{"k":true}]},"id":null}',
    "duplicate": b'{"text":"a","m":{"k":1,"k":2}}',
    "id_number": b'{"text":"a","id":17}',
    "not_object": b'["text"]',
}
for name, line in fast_lines.items():
    put("fuzz_jsonl_fast", name, (b"\x01" if name == "nested" else b"\x00") + line)

# marin report's view of a run (fuzz_report_run): byte 0 even = metrics.jsonl, odd = run.json,
# both from the run whose checkpoint RUN_CKPT_DIR is (RUN/checkpoints/step-N).
run_dir = os.path.dirname(os.path.dirname(os.path.abspath(ckpt)))
metrics = open(os.path.join(run_dir, "metrics.jsonl")).read().splitlines()[:3]
put("fuzz_report_run", "metrics", b"\0" + ("\n".join(metrics) + "\n").encode())
put("fuzz_report_run", "metrics_partial_last",
    b"\0" + ("\n".join(metrics[:2]) + "\n" + metrics[2][: len(metrics[2]) // 2]).encode())
put("fuzz_report_run", "metrics_eval_bad_line",
    b"\2" + b'{"step": 1, "loss": 2.5, "valid_ce": 3.0}\n{"step": 2, "loss"\n'
    b'{"step": 3, "eval": {"domains": {"d": {"ce": 3.1}}}, "forecast": {"predicted": 2.9}}\n')
rj = json.load(open(os.path.join(run_dir, "run.json")))
rj["options"]["data"]["path"] = "rows.bin"  # the run's own temporary directory is of no use
put("fuzz_report_run", "run_json", b"\1" + json.dumps(rj, indent=1).encode())
rj["options"]["model"]["kv_heads_local"] = 3
put("fuzz_report_run", "run_json_bad_config", b"\3" + json.dumps(rj).encode())
put("fuzz_report_run", "run_json_wrong_types",
    b"\1" + json.dumps({"world_size": "two", "lineage": [1], "options": {"batch": [4]}}).encode())

# Rendered tasks (fuzz_task_items): what scripts/render_tasks.py writes for a small harness task
# (multiple_choice with a few-shot example, and the same as generate_until), and hand-made lines
# for the multi-input form and refusals.
task_yaml = """task: hand_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: docs.jsonl
    train: shots.jsonl
test_split: test
training_split: train
output_type: multiple_choice
num_fewshot: 1
description: "Answer the question.\\n\\n"
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_choice: "{{options}}"
doc_to_target: "{{answer}}"
metadata:
  version: 3.0
"""
gen_yaml = (task_yaml.replace("hand_mc", "hand_gen").replace("multiple_choice", "generate_until")
            .replace('doc_to_choice: "{{options}}"\n', "").replace("{{answer}}", "{{options[0]}}"))
with tempfile.TemporaryDirectory() as tmp:
    with open(os.path.join(tmp, "docs.jsonl"), "w") as f:
        f.write('{"question": "Who created the heaven?", "options": ["God", "Moses"], "answer": 0}\n'
                '{"question": "What was upon the face of the deep?", "options": ["light", "darkness", '
                '"water"], "answer": "darkness"}\n')
    with open(os.path.join(tmp, "shots.jsonl"), "w") as f:
        f.write('{"question": "Who spake unto Moses?", "options": ["the LORD", "Aaron"], "answer": 0}\n')
    for name, text in [("multiple_choice", task_yaml), ("generate_until", gen_yaml)]:
        with open(os.path.join(tmp, name + ".yaml"), "w") as f:
            f.write(text)
        out = os.path.join(tmp, name + ".jsonl")
        subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(root), "..", "scripts", "render_tasks.py"),
                        os.path.join(tmp, name + ".yaml"), "--out", out], check=True)
        lines = open(out).read().splitlines()
        header = json.loads(lines[0])
        header["source"] = name + ".yaml"  # not the temporary directory
        put("fuzz_task_items", name, "\n".join([json.dumps(header)] + lines[1:]) + "\n")
put("fuzz_task_items", "multi_input",
    '{"format": "marin-tasks/1", "task": "w", "output_type": "multiple_choice", "metrics": ["acc"]}\n'
    '{"doc_id": 0, "contexts": ["The cup fell, so it", "The cup held, so it"], "choices": ["a", "b"], '
    '"continuation": "broke.", "gold": 0}\n'
    '{"doc_id": 1, "contexts": ["x", "y"], "continuation": "z", "gold": [1]}\n')
put("fuzz_task_items", "refusals",
    '{"format": "marin-tasks/2", "task": "t", "output_type": "loglikelihood", "num_fewshot": "2"}\n'
    '{"doc_id": -1, "context": "c", "target": ""}\n'
    '{"doc_id": 0, "context": "c", "choices": [""], "gold": 3}\n')
