#!/usr/bin/python3
"""Render an lm-evaluation-harness task (YAML + JSONL documents) into the flat JSONL that
`marin eval --tasks` scores (docs/evaluation.md, "Downstream tasks").

    /usr/bin/python3 scripts/render_tasks.py TASK.yaml --out TASK.rendered.jsonl [--num-fewshot K]

Templates are rendered with the real Jinja2 engine, set up as the harness sets it up
(StrictUndefined, keep_trailing_newline, the `regex_replace` filter), and doc_to_text /
doc_to_choice / doc_to_target / few-shot contexts follow the harness's ConfigurableTask rules
(a template that names a document field is that field; a rendered target that is all digits is
an index; few-shot examples drawn with random.Random(seed).sample, seed 1234 as the harness's
default). Keys and values outside the supported subset are refused with an error naming them.

Output: line 1 is a header {"format": "marin-tasks/1", "task", "version", "output_type",
"num_fewshot", "metrics", "config", ...}; every other line is one document:
{"doc_id", "id", "context", "choices", "gold"} (multiple_choice), {"doc_id", "id", "context",
"target"} (loglikelihood, loglikelihood_rolling), plus "audit_text", the text the contamination
audit checks (doc_to_decontamination_query when the task has one, else the document's own
text and gold answer, without few-shot examples).
"""
import argparse
import ast
import json
import os
import random
import re
import sys

try:
    import jinja2
    import yaml
except ImportError as e:  # pragma: no cover
    sys.exit(f"render_tasks: {e}: install python3-jinja2 and python3-yaml (scripts/setup.sh)")

SUPPORTED_KEYS = {
    "task", "task_alias", "tag", "dataset_path", "dataset_name", "dataset_kwargs", "test_split",
    "validation_split", "training_split", "fewshot_split", "output_type", "doc_to_text",
    "doc_to_choice", "doc_to_target", "target_delimiter", "fewshot_delimiter", "num_fewshot",
    "description", "metric_list", "metadata", "should_decontaminate",
    "doc_to_decontamination_query", "fewshot_config",
}
# Per output type: the metrics the scorer computes and the harness's aggregation of each.
METRICS = {
    "multiple_choice": {"acc": "mean", "acc_norm": "mean"},
    "loglikelihood": {"perplexity": "perplexity", "acc": "mean"},
    "loglikelihood_rolling": {"word_perplexity": "weighted_perplexity",
                              "byte_perplexity": "weighted_perplexity",
                              "bits_per_byte": "bits_per_byte"},
}
DEFAULT_METRICS = {
    "multiple_choice": ["acc", "acc_norm"],
    "loglikelihood": ["perplexity", "acc"],
    "loglikelihood_rolling": ["word_perplexity", "byte_perplexity", "bits_per_byte"],
}
HIGHER_IS_BETTER = {"acc": True, "acc_norm": True, "perplexity": False, "word_perplexity": False,
                    "byte_perplexity": False, "bits_per_byte": False}


class TaskError(Exception):
    pass


def regex_replace(string, pattern, repl, count=0):
    return re.sub(pattern, repl, string, count=count)


ENV = jinja2.Environment(loader=jinja2.BaseLoader(), undefined=jinja2.StrictUndefined,
                         keep_trailing_newline=True)
ENV.filters["regex_replace"] = regex_replace


class Loader(yaml.SafeLoader):
    pass


def _refuse_tag(loader, suffix, node):
    raise TaskError(f"YAML tag !{suffix} is not supported (no Python functions: "
                    "process_docs, !function and custom metrics are refused)")


Loader.add_multi_constructor("!", _refuse_tag)


def read_jsonl(path):
    docs = []
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise TaskError(f"{path}: cannot open: {e.strerror}")
    with f:
        try:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError as e:
                    raise TaskError(f"{path}:{n}: not valid JSON: {e.msg} (column {e.colno})")
                if not isinstance(doc, dict):
                    raise TaskError(f"{path}:{n}: expected a JSON object, got {type(doc).__name__}")
                docs.append(doc)
        except UnicodeDecodeError as e:
            raise TaskError(f"{path}: not UTF-8 ({e.reason} at byte {e.start} of a line)")
    return docs


class Task:
    def __init__(self, path):
        self.path = path
        self.dir = os.path.dirname(os.path.abspath(path))
        try:
            with open(path, encoding="utf-8") as f:
                cfg = yaml.load(f, Loader=Loader)
        except OSError as e:
            raise TaskError(f"{path}: cannot open: {e.strerror}")
        except yaml.YAMLError as e:
            raise TaskError(f"{path}: not YAML: {e}")
        if not isinstance(cfg, dict):
            raise TaskError(f"{path}: expected a YAML mapping of task keys")
        for k in cfg:
            if k not in SUPPORTED_KEYS:
                raise TaskError(f"{path}: key '{k}' is not supported by marin's task reader "
                                f"(supported: {', '.join(sorted(SUPPORTED_KEYS))})")
        self.cfg = cfg
        self.name = self.need_str("task")
        if cfg.get("dataset_path") != "json":
            raise TaskError(f"{path}: dataset_path: only 'json' (local JSONL files) is supported, "
                            f"got {cfg.get('dataset_path')!r}")
        if cfg.get("dataset_name") is not None:
            raise TaskError(f"{path}: dataset_name: not supported with dataset_path json")
        kw = cfg.get("dataset_kwargs") or {}
        if not isinstance(kw, dict) or set(kw) != {"data_files"}:
            raise TaskError(f"{path}: dataset_kwargs: expected exactly 'data_files', got "
                            f"{sorted(kw) if isinstance(kw, dict) else kw!r}")
        files = kw["data_files"]
        if isinstance(files, (str, list)):
            files = {"train": files}  # the datasets library's rule for an unnamed file list
        if not isinstance(files, dict):
            raise TaskError(f"{path}: dataset_kwargs.data_files: expected a file, a list or a "
                            "mapping split → file(s)")
        self.files = {s: ([f] if isinstance(f, str) else list(f)) for s, f in files.items()}
        self.output_type = cfg.get("output_type", "generate_until")
        if self.output_type not in METRICS:
            raise TaskError(f"{path}: output_type '{self.output_type}' is not supported "
                            f"(supported: {', '.join(METRICS)})")
        for k in ("training_split", "validation_split", "test_split", "fewshot_split"):
            if k in cfg and cfg[k] is not None and cfg[k] not in self.files:
                raise TaskError(f"{path}: {k}: split '{cfg[k]}' is not in "
                                f"dataset_kwargs.data_files ({', '.join(self.files)})")
        self.eval_split = cfg.get("test_split") or cfg.get("validation_split")
        if not self.eval_split:
            raise TaskError(f"{path}: needs test_split or validation_split")
        if self.output_type == "multiple_choice" and "doc_to_choice" not in cfg:
            raise TaskError(f"{path}: output_type multiple_choice needs doc_to_choice")
        if self.output_type != "multiple_choice" and "doc_to_choice" in cfg:
            raise TaskError(f"{path}: doc_to_choice is only supported with multiple_choice")
        self.target_delimiter = self.opt_str("target_delimiter", " ")
        self.fewshot_delimiter = self.opt_str("fewshot_delimiter", "\n\n")
        self.description = self.opt_str("description", "")
        fc = cfg.get("fewshot_config") or {}
        if not isinstance(fc, dict) or set(fc) - {"sampler"} or \
                fc.get("sampler", "default") not in ("default", "first_n"):
            raise TaskError(f"{path}: fewshot_config: only sampler: default or first_n is "
                            f"supported, got {fc!r}")
        self.sampler = fc.get("sampler", "default")
        self.metrics = self.parse_metrics()
        meta = cfg.get("metadata") or {}
        if not isinstance(meta, dict):
            raise TaskError(f"{path}: metadata: expected a mapping")
        self.version = meta.get("version")
        self.docs = {}

    def need_str(self, key):
        v = self.cfg.get(key)
        if not isinstance(v, str) or not v:
            raise TaskError(f"{self.path}: {key}: expected a non-empty string, got {v!r}")
        return v

    def opt_str(self, key, default):
        v = self.cfg.get(key, default)
        if not isinstance(v, str):
            raise TaskError(f"{self.path}: {key}: expected a string, got {v!r}")
        return v

    def parse_metrics(self):
        allowed = METRICS[self.output_type]
        lst = self.cfg.get("metric_list")
        if lst is None:
            return DEFAULT_METRICS[self.output_type]
        if not isinstance(lst, list) or not lst:
            raise TaskError(f"{self.path}: metric_list: expected a non-empty list")
        out = []
        for i, m in enumerate(lst):
            where = f"{self.path}: metric_list[{i}]"
            if not isinstance(m, dict) or "metric" not in m:
                raise TaskError(f"{where}: expected a mapping with 'metric'")
            for k in m:
                if k not in ("metric", "aggregation", "higher_is_better"):
                    raise TaskError(f"{where}: key '{k}' is not supported "
                                    "(metric, aggregation, higher_is_better)")
            name = m["metric"]
            if name not in allowed:
                raise TaskError(f"{where}: metric '{name}' is not supported for output_type "
                                f"{self.output_type} (supported: {', '.join(allowed)})")
            if m.get("aggregation", allowed[name]) != allowed[name]:
                raise TaskError(f"{where}: aggregation of {name} must be '{allowed[name]}', got "
                                f"{m['aggregation']!r}")
            if m.get("higher_is_better", HIGHER_IS_BETTER[name]) != HIGHER_IS_BETTER[name]:
                raise TaskError(f"{where}: higher_is_better of {name} is "
                                f"{HIGHER_IS_BETTER[name]}")
            out.append(name)
        return out

    def split_docs(self, split):
        if split not in self.docs:
            docs = []
            for f in self.files[split]:
                docs += read_jsonl(f if os.path.isabs(f) else os.path.join(self.dir, f))
            self.docs[split] = docs
        return self.docs[split]

    # --- the harness's ConfigurableTask.doc_to_* rules ---
    def features(self, split):
        keys = set()
        for d in self.split_docs(split):
            keys.update(d)
        return keys

    def render(self, key, template, doc, where):
        try:
            return ENV.from_string(template).render(**doc)
        except jinja2.TemplateError as e:
            raise TaskError(f"{self.path}: {key}: {where}: {type(e).__name__}: {e}")

    def doc_to_text(self, doc, feats, where):
        t = self.cfg.get("doc_to_text", "")
        if isinstance(t, int) and not isinstance(t, bool):
            raise TaskError(f"{self.path}: doc_to_text: an integer (multiple-input tasks) is not "
                            "supported")
        if not isinstance(t, str):
            raise TaskError(f"{self.path}: doc_to_text: expected a template string, got {t!r}")
        if t in feats:
            return str(doc[t])
        s = self.render("doc_to_text", t, doc, where)
        if s.isdigit() and "doc_to_choice" in self.cfg:
            raise TaskError(f"{self.path}: doc_to_text: {where}: renders to an index "
                            f"({s}: multiple-input tasks are not supported)")
        return s

    def doc_to_target(self, doc, feats, where):
        t = self.cfg.get("doc_to_target")
        if t is None:
            raise TaskError(f"{self.path}: doc_to_target is required")
        if isinstance(t, bool):
            raise TaskError(f"{self.path}: doc_to_target: expected a template, field or index")
        if isinstance(t, (int, list)):
            return t
        if not isinstance(t, str):
            raise TaskError(f"{self.path}: doc_to_target: expected a template, field or index")
        if t in feats:
            return doc[t]
        s = self.render("doc_to_target", t, doc, where)
        if s.isdigit() and "doc_to_choice" in self.cfg:
            return ast.literal_eval(s)
        if len(s) >= 2 and s[0] == "[" and s[-1] == "]":
            try:
                return ast.literal_eval(s)
            except (SyntaxError, ValueError):
                pass
        return s

    def doc_to_choice(self, doc, feats, where):
        c = self.cfg["doc_to_choice"]
        if isinstance(c, str):
            if c in feats:
                v = doc[c]
            else:
                s = self.render("doc_to_choice", c, doc, where)
                try:
                    v = ast.literal_eval(s)
                except (SyntaxError, ValueError):
                    raise TaskError(f"{self.path}: doc_to_choice: {where}: renders to {s!r}, "
                                    "not a list literal")
        elif isinstance(c, list):
            v = c
        elif isinstance(c, dict):
            v = list(c.values())
        else:
            raise TaskError(f"{self.path}: doc_to_choice: expected a template, field, list or "
                            "mapping")
        if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
            raise TaskError(f"{self.path}: doc_to_choice: {where}: expected a non-empty list of "
                            f"strings, got {v!r}")
        return v

    def gold_index(self, target, choices, where):
        def one(t):
            if isinstance(t, str):
                if t not in choices:
                    raise TaskError(f"{self.path}: doc_to_target: {where}: {t!r} is not one of "
                                    f"the choices")
                return choices.index(t)
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < len(choices):
                raise TaskError(f"{self.path}: doc_to_target: {where}: {t!r} is not an index "
                                f"into {len(choices)} choices")
            return t
        if isinstance(target, list):
            if not target:
                raise TaskError(f"{self.path}: doc_to_target: {where}: empty list")
            return [one(t) for t in target]
        return one(target)

    def target_string(self, doc, feats, where):
        """The answer as text (few-shot examples, audit, loglikelihood continuation)."""
        t = self.doc_to_target(doc, feats, where)
        if self.output_type == "multiple_choice":
            choices = self.doc_to_choice(doc, feats, where)
            g = self.gold_index(t, choices, where)
            return choices[g[0] if isinstance(g, list) else g]
        if isinstance(t, list):
            t = t[0]
        return str(t)

    def render_all(self, num_fewshot, seed):
        split = self.eval_split
        feats = self.features(split)
        if num_fewshot is None:
            num_fewshot = self.cfg.get("num_fewshot", 0) or 0
        if not isinstance(num_fewshot, int) or num_fewshot < 0:
            raise TaskError(f"{self.path}: num_fewshot: expected an integer ≥ 0")
        pool, pool_split = [], None
        if num_fewshot > 0:
            pool_split = (self.cfg.get("fewshot_split") or self.cfg.get("training_split") or
                          self.cfg.get("validation_split"))
            if not pool_split:
                raise TaskError(f"{self.path}: num_fewshot {num_fewshot} needs fewshot_split, "
                                "training_split or validation_split")
            pool = self.split_docs(pool_split)
            pool_feats = self.features(pool_split)
            if len(pool) < num_fewshot + (pool_split == split):
                raise TaskError(f"{self.path}: {num_fewshot}-shot needs more documents than the "
                                f"{len(pool)} of split '{pool_split}'")
        rnd = random.Random(seed)
        header = {
            "format": "marin-tasks/1", "task": self.name, "version": self.version,
            "output_type": self.output_type, "num_fewshot": num_fewshot,
            "fewshot_seed": seed, "fewshot_split": pool_split, "split": split,
            "metrics": self.metrics, "target_delimiter": self.target_delimiter,
            "source": os.path.abspath(self.path), "config": self.cfg,
        }
        out = [header]
        for i, doc in enumerate(self.split_docs(split)):
            where = f"document {i} of split '{split}'"
            ctx = self.render("description", self.description, doc, where) \
                if self.description else ""
            if num_fewshot > 0:
                if self.sampler == "first_n":
                    shots = pool[:num_fewshot + (pool_split == split)]
                else:
                    shots = rnd.sample(pool, num_fewshot + (pool_split == split))
                if pool_split == split:
                    shots = [d for d in shots if d != doc][:num_fewshot]
                ctx += self.fewshot_delimiter.join(
                    self.doc_to_text(d, pool_feats, "few-shot example") + self.target_delimiter +
                    self.target_string(d, pool_feats, "few-shot example") for d in shots
                ) + self.fewshot_delimiter
            text = self.doc_to_text(doc, feats, where)
            item = {"doc_id": i, "id": str(doc.get("id", i)), "context": ctx + text}
            if self.output_type == "multiple_choice":
                item["choices"] = self.doc_to_choice(doc, feats, where)
                item["gold"] = self.gold_index(self.doc_to_target(doc, feats, where),
                                               item["choices"], where)
                answer = self.target_string(doc, feats, where)
            else:
                answer = self.target_string(doc, feats, where)
                item["target"] = answer
            if self.cfg.get("should_decontaminate") and "doc_to_decontamination_query" in self.cfg:
                q = self.cfg["doc_to_decontamination_query"]
                item["audit_text"] = str(doc[q]) if q in feats else \
                    self.render("doc_to_decontamination_query", q, doc, where)
            else:
                item["audit_text"] = text + self.target_delimiter + answer
            out.append(item)
        if len(out) == 1:
            raise TaskError(f"{self.path}: split '{split}' has no documents")
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("yaml")
    ap.add_argument("--out", required=True)
    ap.add_argument("--num-fewshot", type=int, default=None,
                    help="override the task's num_fewshot")
    ap.add_argument("--fewshot-seed", type=int, default=1234)
    a = ap.parse_args()
    try:
        lines = Task(a.yaml).render_all(a.num_fewshot, a.fewshot_seed)
    except TaskError as e:
        print(f"render_tasks: {e}", file=sys.stderr)
        return 2
    tmp = f"{a.out}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        for obj in lines:
            f.write(json.dumps(obj, ensure_ascii=False, sort_keys=True, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
