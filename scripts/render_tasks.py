#!/usr/bin/python3
"""Render an lm-evaluation-harness task (YAML + JSONL documents) into the flat JSONL that
`marin eval --tasks` scores (docs/evaluation.md, "Downstream tasks").

    /usr/bin/python3 scripts/render_tasks.py TASK.yaml --out TASK.rendered.jsonl [--num-fewshot K]
        [--inline-from GROUP.yaml --inline-index I] [--parquet-rows SRC=DST ...]
    /usr/bin/python3 scripts/render_tasks.py index DIR... --out INDEX.json
    /usr/bin/python3 scripts/render_tasks.py results TASK.yaml --in REQ.json --out OUT.json

Exit status 3 (render mode): the task's data has Parquet files not given with --parquet-rows;
--out then holds {"parquet": [files]}, which marin converts with its own reader before running
this again. `results` runs a task's own process_results and aggregations (--trust-task-code).

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
import math
import os
import random
import re
import resource
import signal
import stat
import sys

try:
    import jinja2
    import jinja2.sandbox
    import yaml
except ImportError as e:  # pragma: no cover
    sys.exit(f"render_tasks: {e}: install python3-jinja2 and python3-yaml (scripts/setup.sh)")

SUPPORTED_KEYS = {
    "task", "task_alias", "tag", "dataset_path", "dataset_name", "dataset_kwargs", "test_split",
    "validation_split", "training_split", "fewshot_split", "output_type", "doc_to_text",
    "doc_to_choice", "doc_to_target", "target_delimiter", "fewshot_delimiter", "num_fewshot",
    "description", "metric_list", "metadata", "should_decontaminate",
    "doc_to_decontamination_query", "fewshot_config", "process_docs", "repeats",
    "generation_kwargs", "filter_list", "process_results",
}
# Per output type: the metrics the scorer computes and the harness's aggregation of each.
METRICS = {
    "multiple_choice": {"acc": "mean", "acc_norm": "mean"},
    "loglikelihood": {"perplexity": "perplexity", "acc": "mean"},
    "loglikelihood_rolling": {"word_perplexity": "weighted_perplexity",
                              "byte_perplexity": "weighted_perplexity",
                              "bits_per_byte": "bits_per_byte"},
    "generate_until": {"exact_match": "mean"},
}
# exact_match's keyword arguments (the harness's, passed through to the generation scorer).
METRIC_KWARGS = {"exact_match": ("ignore_case", "ignore_punctuation", "regexes_to_ignore")}
DEFAULT_MAX_GEN_TOKS = 256  # lm_eval/defaults.py
DEFAULT_METRICS = {
    "multiple_choice": ["acc", "acc_norm"],
    "loglikelihood": ["perplexity", "acc"],
    "loglikelihood_rolling": ["word_perplexity", "byte_perplexity", "bits_per_byte"],
    "generate_until": ["exact_match"],
}
HIGHER_IS_BETTER = {"exact_match": True, "acc": True, "acc_norm": True, "perplexity": False, "word_perplexity": False,
                    "byte_perplexity": False, "bits_per_byte": False}


class TaskError(Exception):
    pass


# Limits of the sandbox (docs/reliability.md, "Task files"). A task file is untrusted input: its
# templates render in Jinja2's immutable sandbox, its YAML is bounded, and the whole renderer runs
# under a wall-clock and address-space limit (--timeout, --memory-mb: marin eval --task-timeout).
MAX_YAML_BYTES = 1 << 20          # one task file
MAX_YAML_VALUES = 1 << 20         # values of a task's YAML with every alias expanded
MAX_YAML_ALIASES = 10000          # alias uses in one task file
MAX_CHOICES = 10000               # choices (or multi-input contexts) of one document
MAX_TEMPLATE_RANGE = 100000       # range(n) in a template (Jinja2's sandbox MAX_RANGE)
MEMORY_MB = 4096                  # the address-space limit main() sets (--memory-mb)


def regex_replace(string, pattern, repl, count=0):
    return re.sub(pattern, repl, string, count=count)


def bounded_range(*args):
    r = range(*args)
    if len(r) > MAX_TEMPLATE_RANGE:
        shown = ", ".join(map(str, args))
        raise TaskError(f"range({shown}) has {len(r)} values: a template may loop over at most "
                        f"{MAX_TEMPLATE_RANGE}")
    return r


# The harness renders with a plain jinja2.Environment (StrictUndefined, keep_trailing_newline,
# regex_replace). The same semantics in the immutable sandbox: no attribute starting with "_"
# (no __globals__, __class__, __init__), no mutation of lists or dicts, and none of Jinja2's
# default globals that lead out of it (cycler, joiner, lipsum): only a bounded range, dict and
# namespace. Jinja2's own filters (join, replace, trim, ...) are the sandbox's; the harness's
# one extra filter is registered by name.
ENV = jinja2.sandbox.ImmutableSandboxedEnvironment(
    loader=jinja2.BaseLoader(), undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
ENV.globals.clear()
ENV.globals.update(range=bounded_range, dict=dict, namespace=jinja2.utils.Namespace)
ENV.filters["regex_replace"] = regex_replace


class Loader(yaml.SafeLoader):
    """SafeLoader with a bound on alias uses (the expansion itself is bounded after loading)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.events.AliasEvent):
            self.marin_aliases = getattr(self, "marin_aliases", 0) + 1
            if self.marin_aliases > MAX_YAML_ALIASES:
                raise TaskError(f"more than {MAX_YAML_ALIASES} YAML aliases")
        return super().compose_node(parent, index)


def check_expanded_size(path, cfg):
    """A YAML alias bomb is small on disk but huge once its aliases are expanded (as json.dumps
    and every walk over the config expand them): count values the way a walk sees them."""
    n, stack = 0, [cfg]
    while stack:
        v = stack.pop()
        n += 1
        if n > MAX_YAML_VALUES:
            raise TaskError(f"{path}: the YAML expands to more than {MAX_YAML_VALUES} values "
                            "(nested aliases: a YAML alias bomb?)")
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def _refuse_tag(loader, suffix, node):
    raise TaskError(f"YAML tag !{suffix} is not supported (only !function)")


class FunctionRef:
    """`!function module.name` as written, resolved against the file that wrote it (the harness's
    import_function: module.py beside that YAML) only with --trust-task-code."""

    def __init__(self, name, yaml_path):
        self.name, self.yaml_path = name, yaml_path

    def module_file(self):
        module = self.name.rsplit(".", 1)[0] if "." in self.name else self.name
        return os.path.join(os.path.dirname(os.path.abspath(self.yaml_path)), module + ".py")

    def __str__(self):
        return f"!function {self.name}"


def _function_tag(loader, node):
    return FunctionRef(loader.construct_scalar(node), loader.marin_path)


Loader.add_constructor("!function", _function_tag)
Loader.add_multi_constructor("!", _refuse_tag)

MAX_INCLUDE_DEPTH = 16
# The keys whose value may be a task's own Python function (--trust-task-code).
FUNCTION_KEYS = ("process_docs", "doc_to_text", "doc_to_target", "doc_to_choice",
                 "process_results")
# The harness's registered aggregations (lm_eval/api/metrics.py) that a task with its own
# process_results may name in metric_list; a !function aggregation is the task's own.
def _mean(arr):
    return sum(arr) / len(arr)


def _weighted_mean(items):
    a, b = zip(*items)
    return sum(a) / sum(b)


AGGREGATIONS = {
    "mean": _mean,
    "median": lambda arr: arr[len(arr) // 2],  # the harness's: no sort
    "perplexity": lambda items: math.exp(-_mean(items)),
    "weighted_perplexity": lambda items: math.exp(-_weighted_mean(items)),
    "bits_per_byte": lambda items: -_weighted_mean(items) / math.log(2),
}


def import_function(ref, key):
    """The harness's import_function: module.py beside the YAML, executed, its attribute."""
    if "." not in ref.name:
        raise TaskError(f"{ref.yaml_path}: {key}: !function {ref.name}: expected module.function")
    module_name, fn_name = ref.name.rsplit(".", 1)
    path = ref.module_file()
    f = open_regular(path, encoding="utf-8")
    with f:
        source = f.read()
    import types
    module = types.ModuleType(module_name)
    module.__file__ = path
    sys.path.insert(0, os.path.dirname(path))  # a task's utils may import its neighbours
    # The harness always has Hugging Face `datasets` installed, and task code imports it (most
    # for the type of process_docs's argument: `import datasets`, `datasets.Dataset`); the
    # task's Python sees marin's stand-in, whether or not the real package is installed here.
    sys.modules["datasets"] = datasets_stand_in()
    try:
        exec(compile(source, path, "exec"), module.__dict__)
    except Exception as e:
        raise TaskError(f"{ref.yaml_path}: {key}: !function {ref.name}: importing {path} failed: "
                        f"{type(e).__name__}: {' '.join(str(e).split())}")
    finally:
        sys.path.pop(0)
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise TaskError(f"{ref.yaml_path}: {key}: !function {ref.name}: {path} has no function "
                        f"'{fn_name}'")
    return fn


class Docs:
    """The part of a datasets.Dataset that the harness's process_docs functions use (map, filter,
    select, rename/remove columns, len, iteration, indexing), over a list of dicts."""

    def __init__(self, rows):
        self.rows = list(rows)

    def __len__(self):
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, i):
        if isinstance(i, str):
            return [r[i] for r in self.rows]
        return self.rows[i]

    @property
    def column_names(self):
        return list(self.rows[0]) if self.rows else []

    def map(self, fn, batched=False, with_indices=False, remove_columns=None, batch_size=1000,
            **_):
        out = []
        if batched:
            for b in range(0, len(self.rows), batch_size or len(self.rows) or 1):
                chunk = self.rows[b:b + (batch_size or len(self.rows))]
                cols = {k: [r[k] for r in chunk] for k in (chunk[0] if chunk else {})}
                args = (cols, list(range(b, b + len(chunk)))) if with_indices else (cols,)
                res = fn(*args)
                keep = {} if remove_columns else cols
                merged = {**keep, **res}
                n = len(next(iter(merged.values()))) if merged else 0
                out += [{k: v[j] for k, v in merged.items()} for j in range(n)]
        else:
            for i, r in enumerate(self.rows):
                res = fn(r, i) if with_indices else fn(r)
                row = dict(r)
                if res is not None:
                    row.update(res)
                out.append(row)
        if remove_columns:
            drop = [remove_columns] if isinstance(remove_columns, str) else remove_columns
            for row in out:
                for k in drop:
                    if not batched or k not in row:
                        row.pop(k, None)
        return Docs(out)

    def filter(self, fn, with_indices=False, **_):
        return Docs([r for i, r in enumerate(self.rows)
                     if (fn(r, i) if with_indices else fn(r))])

    def select(self, indices):
        return Docs([self.rows[i] for i in indices])

    def rename_column(self, old, new):
        return Docs([{(new if k == old else k): v for k, v in r.items()} for r in self.rows])

    def remove_columns(self, cols):
        cols = [cols] if isinstance(cols, str) else cols
        return Docs([{k: v for k, v in r.items() if k not in cols} for r in self.rows])


    @classmethod
    def from_list(cls, rows, **_):
        return cls(rows)

    @classmethod
    def from_dict(cls, cols, **_):
        n = len(next(iter(cols.values()))) if cols else 0
        return cls([{k: v[i] for k, v in cols.items()} for i in range(n)])


_DATASETS = None


def datasets_stand_in():
    """A module `datasets` for task code: Dataset is Docs; anything else the real package has
    (load_dataset, the Hub) is an AttributeError naming it, raised when the task uses it."""
    global _DATASETS
    if _DATASETS is None:
        import types
        _DATASETS = types.ModuleType("datasets")
        _DATASETS.Dataset = Docs
        _DATASETS.__version__ = "0+marin"

        def missing(name):
            raise AttributeError(f"datasets.{name} is not available to task code in marin "
                                 f"(its stand-in for Hugging Face datasets has Dataset only)")
        _DATASETS.__getattr__ = missing
    return _DATASETS


def open_regular(path, mode="r", **kw):
    """Opens a regular file; a FIFO, device or directory would block or never end."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise TaskError(f"{path}: cannot open: {e.strerror}")
    if not stat.S_ISREG(st.st_mode):
        raise TaskError(f"{path}: not a regular file (a FIFO, device or directory is refused)")
    try:
        return open(path, mode, **kw)
    except OSError as e:
        raise TaskError(f"{path}: cannot open: {e.strerror}")


DATA_EXTENSIONS = (".jsonl", ".json", ".jsonl.gz", ".jsonl.zst", ".parquet")


# A Parquet data file → the JSON lines marin's own Parquet reader made of its rows
# (--parquet-rows SRC=DST; marin eval converts the files that main() reports it needs).
PARQUET_ROWS = {}


class NeedParquet(Exception):
    pass


def open_text(path):
    """A data file as UTF-8 text lines: plain, gzip (Python's gzip) or zstd (python3-zstandard)."""
    if path.endswith(".parquet"):
        if os.path.abspath(path) not in PARQUET_ROWS:
            raise NeedParquet(path)
        path = PARQUET_ROWS[os.path.abspath(path)]
    raw = open_regular(path, "rb")
    if path.endswith(".gz"):
        import gzip
        import io
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw), encoding="utf-8")
    if path.endswith(".zst"):
        try:
            import zstandard
        except ImportError:
            raw.close()
            raise TaskError(f"{path}: reading .zst needs python3-zstandard (apt-get install "
                            "python3-zstandard)")
        import io
        return io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw),
                                encoding="utf-8")
    import io
    return io.TextIOWrapper(raw, encoding="utf-8")


def read_docs(path):
    """A split's documents: JSON lines (.jsonl, .jsonl.gz, .jsonl.zst), or a .json file that is
    one array of objects or JSON lines (as the datasets library's json loader reads both)."""
    if path.endswith(".json"):
        with open_text(path) as f:
            try:
                text = f.read()
            except UnicodeDecodeError as e:
                raise TaskError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})")
        if text.lstrip().startswith("["):
            try:
                docs = json.loads(text)
            except json.JSONDecodeError as e:
                raise TaskError(f"{path}:{e.lineno}: not valid JSON: {e.msg} (column {e.colno})")
            for i, d in enumerate(docs):
                if not isinstance(d, dict):
                    raise TaskError(f"{path}: element {i}: expected a JSON object")
            return docs
    return read_jsonl(path)


def read_jsonl(path):
    docs = []
    f = open_text(path)
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


def load_yaml(path):
    with open_regular(path, "rb") as f:
        data = f.read(MAX_YAML_BYTES + 1)
    if len(data) > MAX_YAML_BYTES:
        raise TaskError(f"{path}: larger than {MAX_YAML_BYTES} bytes (a task file's limit)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TaskError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})")
    try:
        loader = Loader(text)
        loader.marin_path = path
        try:
            cfg = loader.get_single_data()
        finally:
            loader.dispose()
    except TaskError as e:
        raise TaskError(f"{path}: {e}")
    except yaml.YAMLError as e:
        raise TaskError(f"{path}: not YAML: {' '.join(str(e).split())}")
    if not isinstance(cfg, dict):
        raise TaskError(f"{path}: expected a YAML mapping of task keys")
    check_expanded_size(path, cfg)
    return cfg


def load_config(path, depth=0):
    """The harness's load_yaml_config: `include` (a file or a list, relative to the including
    file) is loaded first, recursively; of several includes the first listed wins, and the
    including file's own keys win over all of them."""
    cfg = load_yaml(path)
    if "include" not in cfg:
        return cfg
    if depth >= MAX_INCLUDE_DEPTH:
        raise TaskError(f"{path}: include: nested more than {MAX_INCLUDE_DEPTH} deep (a cycle?)")
    inc = cfg.pop("include")
    paths = [inc] if isinstance(inc, str) else inc
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise TaskError(f"{path}: include: expected a file name or a list of them, got {inc!r}")
    merged = {}
    for p in reversed(paths):
        full = p if os.path.isabs(p) else os.path.join(os.path.dirname(path), p)
        if not os.path.exists(full):
            raise TaskError(f"{path}: include: {p}: no such file ({full})")
        merged.update(load_config(full, depth + 1))
    merged.update(cfg)
    return merged


def config_for_json(v):
    """The config as the header records it: a !function is its name."""
    if isinstance(v, dict):
        return {str(k): config_for_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [config_for_json(x) for x in v]
    if isinstance(v, FunctionRef):
        return str(v)
    return v


def inline_config(group_path, index, base_path):
    """A group's inline task config (`task:` list entry `index`, a mapping), as the harness
    reads it: over the registered task's config when its `task:` names one (base_path, the
    entry's keys win), else on its own (paths relative to the group file)."""
    gcfg = load_config(group_path)
    entries = gcfg.get("task")
    if not isinstance(entries, list) or not 0 <= index < len(entries) or \
            not isinstance(entries[index], dict):
        raise TaskError(f"{group_path}: task[{index}]: expected an inline task config (a mapping)")
    entry = entries[index]
    if not isinstance(entry.get("task"), str):
        raise TaskError(f"{group_path}: task[{index}]: an inline task config needs a `task:` name")
    base = load_config(base_path) if base_path != group_path else {}
    return {**base, **entry}


def make_task(a):
    """The Task of a command line: a YAML file, or a group's inline config (--inline-from)."""
    if a.inline_from:
        cfg = inline_config(a.inline_from, a.inline_index, a.yaml)
        return Task(a.yaml, a.trust_task_code, a.dataset_root, cfg)
    return Task(a.yaml, a.trust_task_code, a.dataset_root)


class Task:
    def __init__(self, path, trust_task_code=False, dataset_root=None, cfg=None):
        self.path = path
        self.dir = os.path.dirname(os.path.abspath(path))
        cfg = load_config(path) if cfg is None else cfg
        self.json_cfg = config_for_json(cfg)
        refusals = []  # every refusal of the file at once
        unknown = [k for k in cfg if k not in SUPPORTED_KEYS]
        for k in unknown:
            refusals.append(f"key '{k}' is not supported by marin's task reader")
        for k, v in list(cfg.items()):
            if not isinstance(v, FunctionRef):
                continue
            if k not in FUNCTION_KEYS:
                if k in SUPPORTED_KEYS:
                    refusals.append(f"{k}: !function {v.name}: a Python function is not "
                                    f"supported for {k} (only {', '.join(FUNCTION_KEYS)})")
            elif not trust_task_code:
                refusals.append(f"{k}: !function {v.name} runs the task's own Python "
                                f"({v.module_file()}): pass --trust-task-code to allow it")
            else:
                cfg[k] = import_function(v, k)
        for i, m in enumerate(cfg.get("metric_list") or []):
            if isinstance(m, dict):
                for mk, mv in m.items():
                    if not isinstance(mv, FunctionRef):
                        continue
                    if mk != "aggregation":
                        refusals.append(f"metric_list[{i}].{mk}: !function {mv.name}: a Python "
                                        "metric is not supported (give process_results)")
                    elif not trust_task_code:
                        refusals.append(f"metric_list[{i}].aggregation: !function {mv.name} runs "
                                        f"the task's own Python ({mv.module_file()}): pass "
                                        "--trust-task-code to allow it")
                    else:
                        m[mk] = import_function(mv, f"metric_list[{i}].aggregation")
        # Every further check runs even after one fails, so that one message lists them all.
        refused = {r.split(":")[0].split(".")[0].split("[")[0] for r in refusals}
        pre = f"{path}: "

        def check(fn, *args):
            try:
                return fn(*args)
            except TaskError as e:
                msg = str(e)
                refusals.append(msg[len(pre):] if msg.startswith(pre) else msg)
                return None

        self.cfg = cfg
        self.name = check(self.need_str, "task")
        if cfg.get("dataset_path") in ("json", "parquet"):
            self.files = check(self.data_files, cfg)
        else:
            self.files = check(self.hub_files, cfg, dataset_root)
        self.output_type = cfg.get("output_type", "generate_until")
        typed = self.output_type in METRICS
        if not typed:
            refusals.append(f"output_type {self.output_type!r} is not supported "
                            f"(supported: {', '.join(METRICS)})")
        for k in ("training_split", "validation_split", "test_split", "fewshot_split"):
            if k in cfg and cfg[k] is not None and not isinstance(cfg[k], str):
                refusals.append(f"{k}: expected a split name (a string), got {cfg[k]!r}")
            elif k in cfg and cfg[k] is not None and self.files is not None and \
                    cfg[k] not in self.files:
                refusals.append(f"{k}: split '{cfg[k]}' is not in dataset_kwargs.data_files "
                                f"({', '.join(self.files)})")
        self.eval_split = cfg.get("test_split") or cfg.get("validation_split")
        if not self.eval_split:
            refusals.append("needs test_split or validation_split")
        if self.output_type == "multiple_choice" and "doc_to_choice" not in cfg:
            refusals.append("output_type multiple_choice needs doc_to_choice")
        if typed and self.output_type not in ("multiple_choice", "generate_until") and \
                "doc_to_choice" in cfg:
            refusals.append("doc_to_choice is only supported with multiple_choice and "
                            "generate_until")
        self.target_delimiter = check(self.opt_str, "target_delimiter", " ")
        self.fewshot_delimiter = check(self.opt_str, "fewshot_delimiter", "\n\n")
        if self.fewshot_delimiter is None:  # refused above; the later checks need a value
            self.fewshot_delimiter = "\n\n"
        self.description = check(self.opt_str, "description", "")
        fc = cfg.get("fewshot_config") or {}
        if not isinstance(fc, dict) or set(fc) - {"sampler"} or \
                fc.get("sampler", "default") not in ("default", "first_n"):
            refusals.append(f"fewshot_config: only sampler: default or first_n is supported, "
                            f"got {fc!r}")
            fc = {}
        self.sampler = fc.get("sampler", "default")
        if typed and not refused & {"metric_list", "process_results"}:
            self.metrics = check(self.parse_metrics)
        rep = cfg.get("repeats", 1)
        if self.output_type == "generate_until":
            if not isinstance(rep, int) or isinstance(rep, bool) or not 1 <= rep <= 1000:
                refusals.append(f"repeats: {rep!r}: expected an integer in [1, 1000]")
        elif rep != 1 or isinstance(rep, bool):
            refusals.append(f"repeats: {rep!r}: only 1 (the default) is supported for "
                            f"{self.output_type}")
        self.repeats = rep
        if typed:
            self.generation_kwargs = check(self.parse_generation_kwargs)
            self.filter_list = check(self.parse_filter_list)
        for k in ("process_docs", "process_results"):
            if k in cfg and k not in refused and not callable(cfg[k]):
                refusals.append(f"{k}: expected !function module.name, got {cfg[k]!r}")
        if "process_results" in cfg and typed and self.output_type not in (
                "multiple_choice", "loglikelihood", "loglikelihood_rolling"):
            refusals.append(f"process_results: only with multiple_choice, loglikelihood and "
                            f"loglikelihood_rolling, not {self.output_type}")
        meta = cfg.get("metadata") or {}
        if not isinstance(meta, dict):
            refusals.append("metadata: expected a mapping")
            meta = {}
        self.version = meta.get("version")
        if refusals:
            raise TaskError(f"{path}: " + "; ".join(refusals) + (
                f" (supported keys: {', '.join(sorted(SUPPORTED_KEYS))})" if unknown else ""))
        self.docs = {}

    def data_files(self, cfg):
        path = self.path
        if cfg.get("dataset_name") is not None:
            raise TaskError(f"{path}: dataset_name: not supported with dataset_path "
                            f"{cfg['dataset_path']}")
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
        return {s: ([f] if isinstance(f, str) else list(f)) for s, f in files.items()}

    def hub_files(self, cfg, root):
        """A Hub dataset's local copy under --dataset-root: DIR/P/N/, DIR/P/data/, DIR/P/ (the
        first that exists); split S is the files S.<ext> or S-*.<ext> there, in name order."""
        p, n = cfg.get("dataset_path"), cfg.get("dataset_name")
        if not isinstance(p, str) or not p or p.startswith("/") or ".." in p.split("/"):
            raise TaskError(f"{self.path}: dataset_path: expected a Hub dataset id or json, got "
                            f"{p!r}")
        if n is not None and (not isinstance(n, str) or "/" in n or n in ("", ".", "..")):
            raise TaskError(f"{self.path}: dataset_name: expected a configuration name, got {n!r}")
        if not root:
            raise TaskError(f"{self.path}: dataset_path: '{p}' is a Hub dataset: give "
                            "--dataset-root DIR holding a local copy (DIR/" + p +
                            (f"/{n}/, DIR/{p}" if n else "") + "/data/ or DIR/" + p + "/)")
        tried = ([os.path.join(root, p, n)] if n else []) + [os.path.join(root, p, "data"),
                                                             os.path.join(root, p)]
        where = next((d for d in tried if os.path.isdir(d)), None)
        if where is None:
            raise TaskError(f"{self.path}: dataset_path: no local copy of '{p}'"
                            f"{f' ({n})' if n else ''}: looked for {', '.join(tried)}")
        names = sorted(os.listdir(where))
        files = {}
        for k in ("training_split", "validation_split", "test_split", "fewshot_split"):
            split = cfg.get(k)
            if not isinstance(split, str) or split in files:
                continue
            found = [os.path.join(where, f) for f in names
                     if any(f == split + e or (f.startswith(split + "-") and f.endswith(e))
                            for e in DATA_EXTENSIONS)]
            if found:
                files[split] = found
            else:
                raise TaskError(f"{self.path}: {k}: no files for split '{split}' in {where} "
                                f"(expected {split}.jsonl or {split}-*.jsonl; also .json, "
                                ".jsonl.gz, .jsonl.zst)")
        return files

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

    def parse_generation_kwargs(self):
        """The harness's TaskConfig rules: absent, default_gen_kwargs(fewshot_delimiter); given,
        until defaults to [fewshot_delimiter] and temperature is a float."""
        g = self.cfg.get("generation_kwargs")
        if self.output_type != "generate_until":
            if g is not None:
                raise TaskError(f"{self.path}: generation_kwargs: only with output_type "
                                "generate_until")
            return None
        if g is None:
            return {"until": [self.fewshot_delimiter], "max_gen_toks": DEFAULT_MAX_GEN_TOKS,
                    "do_sample": False, "temperature": 0.0}
        if not isinstance(g, dict):
            raise TaskError(f"{self.path}: generation_kwargs: expected a mapping, got {g!r}")
        g = dict(g)
        allowed = ("until", "max_gen_toks", "do_sample", "temperature")
        bad = [k for k in g if k not in allowed]
        if bad:
            raise TaskError(f"{self.path}: generation_kwargs: keys {bad} are not supported "
                            f"({', '.join(allowed)})")
        if "until" not in g:
            g["until"] = [self.fewshot_delimiter]
        elif isinstance(g["until"], str):
            g["until"] = [g["until"]]
        if not isinstance(g["until"], list) or not all(isinstance(u, str) for u in g["until"]):
            raise TaskError(f"{self.path}: generation_kwargs.until: expected strings, got "
                            f"{g['until']!r}")
        g.setdefault("max_gen_toks", DEFAULT_MAX_GEN_TOKS)
        mg = g["max_gen_toks"]
        if not isinstance(mg, int) or isinstance(mg, bool) or mg < 1:
            raise TaskError(f"{self.path}: generation_kwargs.max_gen_toks: expected an integer "
                            f"≥ 1, got {mg!r}")
        g.setdefault("do_sample", False)
        if not isinstance(g["do_sample"], bool):
            raise TaskError(f"{self.path}: generation_kwargs.do_sample: expected true or false")
        try:
            g["temperature"] = float(g.get("temperature", 0.0))
        except (TypeError, ValueError):
            raise TaskError(f"{self.path}: generation_kwargs.temperature: expected a number, "
                            f"got {g['temperature']!r}")
        return g

    def parse_filter_list(self):
        """filter_list as written (the generation scorer applies it); absent, the harness's
        default take_first."""
        fl = self.cfg.get("filter_list")
        if self.output_type != "generate_until":
            if fl is not None:
                raise TaskError(f"{self.path}: filter_list: only with output_type "
                                "generate_until")
            return None
        if fl is None:
            return [{"name": "none", "filter": [{"function": "take_first"}]}]
        if not isinstance(fl, list) or not fl:
            raise TaskError(f"{self.path}: filter_list: expected a non-empty list")
        for i, f in enumerate(fl):
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or \
                    not isinstance(f.get("filter"), list) or not f["filter"]:
                raise TaskError(f"{self.path}: filter_list[{i}]: expected {{name: str, filter: "
                                "[{function: ...}, ...]}")
            for j, step in enumerate(f["filter"]):
                if not isinstance(step, dict) or not isinstance(step.get("function"), str):
                    raise TaskError(f"{self.path}: filter_list[{i}].filter[{j}]: expected a "
                                    "mapping with 'function'")
                for k, v in step.items():
                    if isinstance(v, FunctionRef):
                        raise TaskError(f"{self.path}: filter_list[{i}].filter[{j}].{k}: "
                                        f"!function {v.name}: a Python filter is not supported")
        return config_for_json(fl)

    def parse_own_metrics(self):
        """metric_list of a task with its own process_results: any metric name, aggregated by
        a registered aggregation (default mean) or the task's !function."""
        lst = self.cfg.get("metric_list")
        if not isinstance(lst, list) or not lst:
            raise TaskError(f"{self.path}: metric_list: a task with process_results needs a "
                            "non-empty metric_list (the metrics its dicts give)")
        self.aggregations, self.higher = {}, {}
        for i, m in enumerate(lst):
            where = f"{self.path}: metric_list[{i}]"
            if not isinstance(m, dict) or not isinstance(m.get("metric"), str):
                raise TaskError(f"{where}: expected a mapping with 'metric' (a name)")
            extra = set(m) - {"metric", "aggregation", "higher_is_better"}
            if extra:
                raise TaskError(f"{where}: key(s) {', '.join(sorted(extra))} not supported "
                                "(metric, aggregation, higher_is_better)")
            agg = m.get("aggregation", "mean")
            if not callable(agg) and agg not in AGGREGATIONS:
                raise TaskError(f"{where}: aggregation {agg!r}: expected one of "
                                f"{', '.join(AGGREGATIONS)} or !function module.name")
            self.aggregations[m["metric"]] = agg
            self.higher[m["metric"]] = bool(m.get("higher_is_better", True))
        return list(self.aggregations)

    def parse_metrics(self):
        if callable(self.cfg.get("process_results")):
            return self.parse_own_metrics()
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
            name = m["metric"]
            for k in m:
                if k not in ("metric", "aggregation", "higher_is_better") + \
                        METRIC_KWARGS.get(name, ()):
                    raise TaskError(f"{where}: key '{k}' is not supported "
                                    "(metric, aggregation, higher_is_better" +
                                    "".join(", " + x for x in METRIC_KWARGS.get(name, ())) + ")")
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
                docs += read_docs(f if os.path.isabs(f) else os.path.join(self.dir, f))
            if callable(self.cfg.get("process_docs")):
                # The harness applies process_docs to every split it reads documents from.
                out = self.call("process_docs", self.cfg["process_docs"], Docs(docs),
                                f"split '{split}'")
                try:
                    docs = list(out)
                except TypeError:
                    raise TaskError(f"{self.path}: process_docs: split '{split}': returned "
                                    f"{type(out).__name__}, not a dataset of documents")
                for i, d in enumerate(docs):
                    if not isinstance(d, dict):
                        raise TaskError(f"{self.path}: process_docs: split '{split}': document "
                                        f"{i} is a {type(d).__name__}, not a mapping")
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
        except jinja2.sandbox.SecurityError as e:
            raise TaskError(f"{self.path}: {key}: {where}: refused by the template sandbox: {e}")
        except TaskError as e:
            raise TaskError(f"{self.path}: {key}: {where}: {e}")
        except RecursionError:
            raise TaskError(f"{self.path}: {key}: {where}: the template recurses too deeply "
                            "(a recursive macro?)")
        except MemoryError:
            raise TaskError(f"{self.path}: {key}: {where}: the template needs more than the "
                            f"renderer's memory limit ({MEMORY_MB} MiB)")
        except (jinja2.TemplateError, ArithmeticError, LookupError, TypeError,
                ValueError) as e:
            raise TaskError(f"{self.path}: {key}: {where}: {type(e).__name__}: "
                            f"{' '.join(str(e).split())}")

    def call(self, key, fn, arg, where, *more):
        """A task's own function (--trust-task-code); its exception is one line naming the key."""
        try:
            return fn(arg, *more)
        except TaskError:
            raise
        except Exception as e:
            raise TaskError(f"{self.path}: {key}: {where}: the task's function "
                            f"{getattr(fn, '__name__', '?')} raised {type(e).__name__}: "
                            f"{' '.join(str(e).split())}")

    def doc_to_text(self, doc, feats, where):
        t = self.cfg.get("doc_to_text", "")
        if callable(t):
            t = self.call("doc_to_text", t, doc, where)
            if isinstance(t, int) and not isinstance(t, bool) and "doc_to_choice" in self.cfg:
                return t  # multi-input: the index of the right context among doc_to_choice
            return str(t)
        if isinstance(t, int) and not isinstance(t, bool):
            raise TaskError(f"{self.path}: doc_to_text: a constant integer is not supported")
        if not isinstance(t, str):
            raise TaskError(f"{self.path}: doc_to_text: expected a template string, got {t!r}")
        if t in feats:
            return str(doc[t])
        s = self.render("doc_to_text", t, doc, where)
        if s.isdigit() and "doc_to_choice" in self.cfg:
            return ast.literal_eval(s)  # multi-input, as the harness reads an index
        return s

    def doc_to_target(self, doc, feats, where):
        t = self.cfg.get("doc_to_target")
        if t is None:
            raise TaskError(f"{self.path}: doc_to_target is required")
        if callable(t):
            return self.call("doc_to_target", t, doc, where)
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
        if callable(c):
            v = self.call("doc_to_choice", c, doc, where)
            if isinstance(v, dict):
                v = list(v.values())
        elif isinstance(c, str):
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
        if isinstance(v, list) and len(v) > MAX_CHOICES:
            raise TaskError(f"{self.path}: doc_to_choice: {where}: {len(v)} choices (at most "
                            f"{MAX_CHOICES})")
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

    def generation_target(self, doc, feats, where):
        """The reference(s) of a generate_until document: doc_to_target as a string, a list of
        strings (multiple targets), or with doc_to_choice the choice it indexes."""
        t = self.doc_to_target(doc, feats, where)
        if "doc_to_choice" in self.cfg:
            choices = self.doc_to_choice(doc, feats, where)
            g = self.gold_index(t, choices, where)
            return choices[g[0] if isinstance(g, list) else g]
        if isinstance(t, list):
            if not t:
                raise TaskError(f"{self.path}: doc_to_target: {where}: an empty list")
            return [str(x) for x in t]
        return str(t)

    def add_hashes(self, item, doc, feats):
        """The harness's sample hashes (evaluation_tracker / evaluator): sha256 of the document
        as json.dumps(doc, indent=2, ensure_ascii=False), of the first request's first argument
        (its context) and of str(doc_to_target(doc))."""
        import hashlib

        def h(text):
            return hashlib.sha256(text.encode("utf-8")).hexdigest()
        where = f"document {item['doc_id']}"
        prompt = item["contexts"][0] if "contexts" in item else item["context"]
        if self.output_type == "loglikelihood_rolling":
            prompt = item["target"]
        item["doc_hash"] = h(json.dumps(doc, indent=2, default=str, ensure_ascii=False))
        item["prompt_hash"] = h(prompt)
        item["target_hash"] = h(str(self.doc_to_target(doc, feats, where)))

    def shot_text(self, d, feats):
        """One few-shot example; of a multi-input task, the right context (the harness's
        q = c[q]) then the continuation."""
        where = "few-shot example"
        q = self.doc_to_text(d, feats, where)
        if isinstance(q, int):
            choices = self.doc_to_choice(d, feats, where)
            if not 0 <= q < len(choices):
                raise TaskError(f"{self.path}: doc_to_text: {where}: index {q} is not one of the "
                                f"{len(choices)} contexts")
            return choices[q] + self.target_delimiter + str(self.doc_to_target(d, feats, where))
        return q + self.target_delimiter + self.target_string(d, feats, where)

    def multi_input_item(self, i, doc, feats, where, prefix, gold):
        """A multi-input document (winogrande): doc_to_text gave the index of the right context,
        doc_to_choice the contexts, doc_to_target the one continuation scored after each."""
        if self.output_type != "multiple_choice":
            raise TaskError(f"{self.path}: doc_to_text: {where}: an index (multi-input) needs "
                            "output_type multiple_choice")
        choices = self.doc_to_choice(doc, feats, where)
        if not 0 <= gold < len(choices):
            raise TaskError(f"{self.path}: doc_to_text: {where}: index {gold} is not one of the "
                            f"{len(choices)} contexts")
        cont = self.doc_to_target(doc, feats, where)
        if not isinstance(cont, str) or not cont:
            raise TaskError(f"{self.path}: doc_to_target: {where}: a multi-input task's target "
                            f"is the continuation text, got {cont!r}")
        item = {"doc_id": i, "id": str(doc.get("id", i)),
                "contexts": [prefix + c for c in choices], "choices": choices,
                "continuation": cont, "gold": [gold], "doc": doc}
        if self.cfg.get("should_decontaminate") and "doc_to_decontamination_query" in self.cfg:
            q = self.cfg["doc_to_decontamination_query"]
            item["audit_text"] = str(doc[q]) if q in feats else \
                self.render("doc_to_decontamination_query", q, doc, where)
        else:
            item["audit_text"] = choices[gold] + self.target_delimiter + cont
        return item

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
            "source": os.path.abspath(self.path), "config": self.json_cfg,
        }
        if callable(self.cfg.get("process_results")):
            # Scored by the task's own Python after the forwards (results_main).
            header["process_results"] = str(self.json_cfg["process_results"])
            header["aggregations"] = {m: a if isinstance(a, str) else f"!function {a.__name__}"
                                      for m, a in self.aggregations.items()}
            header["higher_is_better"] = self.higher
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
                    self.shot_text(d, pool_feats) for d in shots) + self.fewshot_delimiter
            text = self.doc_to_text(doc, feats, where)
            if isinstance(text, int):
                item = self.multi_input_item(i, doc, feats, where, ctx, text)
                out.append(item)
                continue
            item = {"doc_id": i, "id": str(doc.get("id", i)), "context": ctx + text, "doc": doc}
            if self.output_type == "multiple_choice":
                item["choices"] = self.doc_to_choice(doc, feats, where)
                item["gold"] = self.gold_index(self.doc_to_target(doc, feats, where),
                                               item["choices"], where)
                answer = self.target_string(doc, feats, where)
            elif self.output_type == "generate_until":
                item["target"] = self.generation_target(doc, feats, where)
                answer = item["target"] if isinstance(item["target"], str) else \
                    item["target"][0]
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
        for item, doc in zip(out[1:], self.split_docs(split)):
            self.add_hashes(item, doc, feats)
        if any("contexts" in x for x in out[1:]) and not all("contexts" in x for x in out[1:]):
            raise TaskError(f"{self.path}: doc_to_text gives an index (multi-input) for some "
                            "documents and text for others")
        if "contexts" in out[1]:
            header["format"] = "marin-tasks/2"  # multi-input documents (contexts, continuation)
        if self.output_type == "generate_until":
            header.update(format="marin-tasks/2", generation_kwargs=self.generation_kwargs,
                          filter_list=self.filter_list, repeats=self.repeats,
                          metric_list=config_for_json(self.cfg.get("metric_list") or
                                                      [{"metric": m} for m in self.metrics]))
        return out


def group_config(cfg, path):
    """A group file's keys as the C++ side aggregates them (the harness's GroupConfig): its member
    names (`task:` strings; an inline task dict is kept for the C++ side to refuse by name),
    `group_alias`, `aggregate_metric_list` (AggMetricConfig's defaults filled in: aggregation
    "mean", weight_by_size false, filter_list ["none"]) or null, and metadata.version."""
    aml = cfg.get("aggregate_metric_list")
    if isinstance(aml, dict):
        aml = [aml]
    if aml is not None:
        if not isinstance(aml, list):
            aml = [aml]  # the C++ side refuses a non-dict entry, naming it
        out = []
        for m in aml:
            if isinstance(m, dict):
                m = dict(m)
                m.setdefault("aggregation", "mean")
                m.setdefault("weight_by_size", False)
                fl = m.get("filter_list", "none")
                m["filter_list"] = [fl] if isinstance(fl, str) else fl
            out.append(config_for_json(m))
        aml = out
    meta = cfg.get("metadata")
    return {"file": path, "task": config_for_json(cfg.get("task")),
            "group_alias": cfg.get("group_alias"), "aggregate_metric_list": aml,
            "version": meta.get("version") if isinstance(meta, dict) else None}


def index_main(argv):
    """`render_tasks.py index DIR... --out FILE`: the harness's TaskManager index of every YAML
    below the directories (as --include_path): {"tasks": {task: file}, "tags": {tag: [file]},
    "groups": {group: file}, "skipped": {file: why}, "duplicates": {task: [file, ...]}}. Files are read as the harness's "simple"
    mode reads them (a !function is not imported), each under the same YAML limits."""
    ap = argparse.ArgumentParser(prog="render_tasks.py index")
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    tasks, tags, groups, skipped, duplicates, group_configs = {}, {}, {}, {}, {}, {}
    for root in a.dirs:
        if not os.path.isdir(root):
            raise TaskError(f"--task-dir {root}: not a directory")
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith((".yaml", ".yml")):
                    continue
                path = os.path.join(dirpath, fn)
                try:
                    cfg = load_config(path)
                except TaskError as e:
                    skipped[path] = str(e)
                    continue
                t = cfg.get("task")
                if "group" in cfg and isinstance(t, list):
                    g = cfg["group"]
                    if isinstance(g, str):
                        groups.setdefault(g, path)
                        group_configs.setdefault(g, group_config(cfg, path))
                    continue
                if not isinstance(t, str):
                    continue  # a file only included by others (e.g. _default_template_yaml)
                if t in tasks:
                    duplicates.setdefault(t, [tasks[t]]).append(path)
                tasks.setdefault(t, path)
                tag = cfg.get("tag") or []
                for name in [tag] if isinstance(tag, str) else tag:
                    if isinstance(name, str):
                        tags.setdefault(name, []).append(path)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"tasks": tasks, "tags": tags, "groups": groups, "skipped": skipped,
                   "duplicates": duplicates, "group_configs": group_configs}, f,
                  default=str)
    return 0


def results_main(argv):
    """`render_tasks.py results YAML --in FILE --out FILE`: a task's own process_results and
    aggregations, as the harness runs them. FILE in: {"items": [{"doc_id", "doc", "results"}]}
    (results: [[ll, is_greedy], ...] per request, or [ll] for loglikelihood_rolling); out:
    {"per_item": [{metric: value}], "values": {metric: aggregate}}."""
    ap = argparse.ArgumentParser(prog="render_tasks.py results")
    ap.add_argument("yaml")
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--trust-task-code", action="store_true")
    ap.add_argument("--dataset-root", default=None)
    ap.add_argument("--inline-from", default=None)
    ap.add_argument("--inline-index", type=int, default=0)
    a = ap.parse_args(argv)
    task = make_task(a)
    fn = task.cfg.get("process_results")
    if not callable(fn):
        raise TaskError(f"{a.yaml}: process_results: the task has none")
    with open(a.inp, encoding="utf-8") as f:
        req = json.load(f)
    per = []
    for it in req["items"]:
        where = f"document {it['doc_id']}"
        res = [tuple(r) if isinstance(r, list) else r for r in it["results"]]
        d = task.call("process_results", fn, it["doc"], where, res)
        if not isinstance(d, dict):
            raise TaskError(f"{a.yaml}: process_results: {where}: expected a dict of metrics, "
                            f"got {type(d).__name__}")
        missing = [m for m in task.metrics if m not in d]
        if missing:
            raise TaskError(f"{a.yaml}: process_results: {where}: the dict lacks metric(s) "
                            f"{', '.join(missing)} of metric_list (it has {', '.join(map(str, d))})")
        per.append({m: d[m] for m in task.metrics})
    values = {}
    if per:
        for m in task.metrics:
            agg = task.aggregations[m]
            fn_agg = AGGREGATIONS[agg] if isinstance(agg, str) else agg
            v = task.call(f"metric_list {m} aggregation", fn_agg, [p[m] for p in per],
                          f"{len(per)} documents")
            try:
                values[m] = float(v)
            except (TypeError, ValueError):
                raise TaskError(f"{a.yaml}: metric_list {m}: the aggregation gave {v!r}, "
                                "not a number")
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"per_item": per, "values": values}, f, default=str)
    return 0


def reporting_errors(run, what, failed):
    """run(), its failure as one line on stderr and exit status 2: never a traceback. `what` names
    the file or mode in the message, `failed` starts the line of an unexpected exception."""
    try:
        return run()
    except TaskError as e:
        msg = str(e)
    except MemoryError:
        msg = (f"{what}: rendering needs more than the renderer's memory limit "
               f"({MEMORY_MB} MiB)")
    except RecursionError:
        msg = f"{what}: nesting too deep (a recursive template or structure)"
    except Exception as e:  # never a traceback: one line naming the file or the mode
        msg = f"{failed}: {type(e).__name__}: {' '.join(str(e).split())}"
    print(f"render_tasks: {msg}", file=sys.stderr)
    return 2


def render_main(a):
    """Renders one task file into a.out (JSON lines, written atomically)."""
    for m in a.parquet_rows:
        src, _, dst = m.partition("=")
        PARQUET_ROWS[os.path.abspath(src)] = dst
    task = make_task(a)
    need = sorted({os.path.abspath(f if os.path.isabs(f) else os.path.join(task.dir, f))
                   for fs in task.files.values() for f in fs if f.endswith(".parquet")}
                  - set(PARQUET_ROWS))
    if need:  # marin eval converts them with its Parquet reader and runs this again
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump({"parquet": need}, f)
        return 3
    lines = task.render_all(a.num_fewshot, a.fewshot_seed)
    tmp = f"{a.out}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        for obj in lines:
            f.write(json.dumps(obj, ensure_ascii=False, sort_keys=True, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, a.out)
    return 0


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "results":
        return reporting_errors(lambda: results_main(sys.argv[2:]), "results", "results")
    if mode == "index":
        return reporting_errors(lambda: index_main(sys.argv[2:]), "index", "index")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("yaml")
    ap.add_argument("--out", required=True)
    ap.add_argument("--num-fewshot", type=int, default=None,
                    help="override the task's num_fewshot")
    ap.add_argument("--fewshot-seed", type=int, default=1234)
    ap.add_argument("--dataset-root", default=None,
                    help="where local copies of Hub datasets are (DIR/PATH/NAME/ ...)")
    ap.add_argument("--trust-task-code", action="store_true",
                    help="run the task's own Python (!function) as the harness does")
    ap.add_argument("--timeout", type=int, default=120,
                    help="wall-clock seconds before the renderer gives up (0: none)")
    ap.add_argument("--memory-mb", type=int, default=4096,
                    help="address-space limit in MiB (0: none)")
    ap.add_argument("--inline-from", default=None,
                    help="GROUP.yaml: render entry --inline-index of its task: list (over YAML)")
    ap.add_argument("--inline-index", type=int, default=0)
    ap.add_argument("--parquet-rows", action="append", default=[],
                    help="SRC=DST: the rows of Parquet file SRC as JSON lines in DST")
    a = ap.parse_args()
    global MEMORY_MB
    MEMORY_MB = a.memory_mb
    if a.memory_mb > 0:
        lim = a.memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    if a.timeout > 0:
        def on_alarm(signum, frame):
            raise TaskError(f"{a.yaml}: rendering did not finish within {a.timeout} s "
                            "(--task-timeout)")
        signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(a.timeout)
    return reporting_errors(lambda: render_main(a), a.yaml,
                            f"{a.yaml}: the renderer failed")


if __name__ == "__main__":
    sys.exit(main())
