// Harness task files as untrusted input (issue 37 item 1) and the harness's loglikelihood rule
// (issue 40): scripts/render_tasks.py renders templates in Jinja2's immutable sandbox under
// YAML, time and memory limits, and every refusal is one clear line naming the file and key;
// a loglikelihood task's metrics equal a direct computation through python/modeling_marin.py
// that follows the harness's _encode_pair and _loglikelihood_tokens.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/rng.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "eval/contamination.hpp"
#include "eval/tasks/task_items.hpp"
#include "model/params.hpp"
#include "train/checkpoint.hpp"

namespace marin {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

// A multiple-choice task over docs.jsonl whose doc_to_text (or other keys) the test chooses.
std::string task_yaml(const std::string& doc_to_text, const std::string& extra = "",
                      const std::string& data = "docs.jsonl") {
  return "task: probe\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: " + data +
         "\ntest_split: test\noutput_type: multiple_choice\ndoc_to_choice: choices\n"
         "doc_to_target: answer\ndoc_to_text: " +
         json(doc_to_text).dump() + "\n" + extra;
}

void write_docs(const TempDir& d) {
  marin::testing::write_text(
      d.str("docs.jsonl"), "{\"question\": \"Q?\", \"choices\": [\"a\", \"b\"], \"answer\": 0}\n");
}

struct Outcome {
  std::string error;  // "" when it rendered
  double seconds = 0;
};
Outcome render(const std::string& yaml, int timeout_s = 120) {
  eval::RenderOptions ro;
  ro.timeout_s = timeout_s;
  const auto t0 = std::chrono::steady_clock::now();
  Outcome o;
  try {
    eval::load_task(yaml, ro);
  } catch (const Error& e) {
    o.error = e.what();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

Outcome render_with(const std::string& yaml, const eval::RenderOptions& ro) {
  Outcome o;
  try {
    eval::load_task(yaml, ro);
  } catch (const Error& e) {
    o.error = e.what();
  }
  return o;
}

// One line, naming the file, never a Python traceback.
void expect_clear(const Outcome& o, const std::string& file, const std::string& needle) {
  EXPECT_NE(o.error.find(needle), std::string::npos) << o.error;
  EXPECT_NE(o.error.find(file), std::string::npos) << o.error;
  EXPECT_EQ(o.error.find("Traceback"), std::string::npos) << o.error;
  EXPECT_EQ(o.error.find('\n'), std::string::npos) << o.error;
}

TEST(HarnessSandbox, TemplateEscapesFailWithAClearError) {
  TempDir d("hsandbox-escape");
  write_docs(d);
  const std::string marker = d.str("pwned");
  // Each escape the probe used (and its neighbours): shell commands through the globals of a
  // Jinja2 default global or a template object, file reads through lipsum, Python's class graph.
  const std::vector<std::pair<std::string, std::string>> escapes = {
      {"{{ cycler.__init__.__globals__.os.popen('touch " + marker + "').read() }}", "unsafe"},
      {"{{ joiner.__init__.__globals__.os.popen('touch " + marker + "').read() }}", "unsafe"},
      {"{{ lipsum.__globals__['os'].popen('touch " + marker + "').read() }}",
       "'lipsum' is undefined"},
      {"{{ self.__init__.__globals__.__builtins__.open('/etc/passwd').read() }}", "unsafe"},
      {"{{ self._TemplateReference__context }}", "unsafe"},
      {"{{ question.__class__.__mro__[1].__subclasses__() }}", "unsafe"},
      {"{{ ''.__class__.__base__.__subclasses__() }}", "unsafe"},
      {"{{ namespace.__init__.__globals__ }}", "unsafe"},
      {"{{ question.format.__globals__ }}", "unsafe"},
      {"{{ '{0.__class__}'.format(question) }}", "unsafe"},
      {"{% set l = [1] %}{{ l.append(2) }}", "unsafe"},  // immutable: no mutation either
  };
  for (const auto& [tpl, why] : escapes) {
    marin::testing::write_text(d.str("task.yaml"), task_yaml(tpl));
    const Outcome o = render(d.str("task.yaml"));
    SCOPED_TRACE(tpl);
    expect_clear(o, "task.yaml", "doc_to_text");
    EXPECT_NE(o.error.find(why), std::string::npos) << o.error;
    EXPECT_FALSE(fs::exists(marker)) << "a template ran a shell command";
  }
  // The harness's own templates still render: fields, filters, regex_replace, a small range.
  marin::testing::write_text(
      d.str("task.yaml"),
      task_yaml("{{ question|regex_replace('\\\\?', '!')|upper }}{% for i in range(2) %}.{% "
                "endfor %}{{ choices|join(',') }}"));
  EXPECT_EQ(render(d.str("task.yaml")).error, "");
  eval::TaskItems t = eval::load_task(d.str("task.yaml"), {});
  EXPECT_EQ(t.items.at(0).context, "Q!..a,b");
}

TEST(HarnessSandbox, UnboundedWorkIsRefusedWithinTheLimits) {
  TempDir d("hsandbox-limits");
  write_docs(d);
  // A 604-byte billion laughs: 9 levels of 9 aliases.
  std::string bomb =
      "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int k = 0; k < 9; ++k) bomb += std::string(k ? "," : "") + "*" + char(c - 1);
    bomb += "]\n";
  }
  marin::testing::write_text(d.str("bomb.yaml"), task_yaml("{{question}}") + bomb);
  Outcome o = render(d.str("bomb.yaml"));
  expect_clear(o, "bomb.yaml", "alias bomb");
  EXPECT_LT(o.seconds, 60);

  marin::testing::write_text(d.str("range.yaml"),
                             task_yaml("{% for i in range(300000000) %}x{% endfor %}"));
  o = render(d.str("range.yaml"));
  expect_clear(o, "range.yaml", "range(300000000) has 300000000 values");

  ASSERT_EQ(mkfifo(d.str("fifo.jsonl").c_str(), 0600), 0);
  marin::testing::write_text(d.str("fifo.yaml"), task_yaml("{{question}}", "", "fifo.jsonl"));
  o = render(d.str("fifo.yaml"));
  expect_clear(o, "fifo.jsonl", "not a regular file");
  EXPECT_LT(o.seconds, 60);

  marin::testing::write_text(
      d.str("many.yaml"),
      "task: probe\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
      "    test: docs.jsonl\ntest_split: test\noutput_type: multiple_choice\n"
      "doc_to_choice: \"{{ range(20000)|map('string')|list }}\"\n"
      "doc_to_target: answer\ndoc_to_text: question\n");
  o = render(d.str("many.yaml"));
  expect_clear(o, "many.yaml", "20000 choices (at most 10000)");

  marin::testing::write_text(d.str("macro.yaml"),
                             task_yaml("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"));
  expect_clear(render(d.str("macro.yaml")), "macro.yaml", "recurses too deeply");

  marin::testing::write_text(d.str("latin1.yaml"), "task: caf\xe9\n");
  expect_clear(render(d.str("latin1.yaml")), "latin1.yaml", "not UTF-8");

  marin::testing::write_text(d.str("split.yaml"),
                             task_yaml("{{question}}", "validation_split: [a]\n"));
  expect_clear(render(d.str("split.yaml")), "split.yaml",
               "validation_split: expected a split name (a string), got ['a']");

  marin::testing::write_text(d.str("huge.yaml"), task_yaml("{{ 'x' * 8000000000 }}"));
  expect_clear(render(d.str("huge.yaml")), "huge.yaml", "doc_to_text");
  expect_clear(render(d.str("huge.yaml")), "huge.yaml", "memory limit (4096 MiB)");
}

TEST(HarnessSandbox, TheRendererIsStoppedAtTheTimeout) {
  TempDir d("hsandbox-time");
  write_docs(d);
  // Python-level work: the renderer's own alarm ends it after 1 s.
  marin::testing::write_text(d.str("loop.yaml"),
                             task_yaml("{% for i in range(100000) %}{% for j in range(100000) %}"
                                       "{% endfor %}{% endfor %}"));
  Outcome o = render(d.str("loop.yaml"), 1);
  expect_clear(o, "loop.yaml", "did not finish within 1 s");
  EXPECT_LT(o.seconds, 60);  // generous: Python's start-up alone is slow on a loaded machine
  // Work inside one C call (a catastrophic regex) does not see the alarm: marin kills it.
  marin::testing::write_text(d.str("regex.yaml"),
                             task_yaml("{{ ('a' * 64 + 'b')|regex_replace('(a+)+c', '') }}"));
  o = render(d.str("regex.yaml"), 1);
  expect_clear(o, "regex.yaml", "did not finish within 1 s and was stopped");
  EXPECT_GE(o.seconds, 1 + eval::RenderOptions::kKillGraceS);
  EXPECT_LT(o.seconds, 60);
}

// The harness's load_yaml_config: includes load first (of a list, the first listed wins), the
// including file's own keys win over all of them, recursively; a !function resolves beside the
// file that wrote it and runs only with --trust-task-code.
TEST(HarnessYaml, IncludeOrderAndFunctionsWithAndWithoutTrust) {
  TempDir d("hyaml");
  fs::create_directories(d.str("sub"));
  marin::testing::write_text(
      d.str("docs.jsonl"),
      "{\"question\": \"Q?\", \"choices\": [\"a\", \"b\"], \"answer\": 0}\n"
      "{\"question\": \"R?\", \"choices\": [\"c\", \"d\"], \"answer\": 1}\n");
  marin::testing::write_text(
      d.str("sub/base.yaml"),
      "dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: docs.jsonl\n"
      "test_split: test\noutput_type: multiple_choice\n"
      "doc_to_choice: !function utils.choices\ndoc_to_target: answer\n"
      "doc_to_text: \"base: {{question}}\"\ndescription: \"from base\\n\"\n"
      "target_delimiter: \"=\"\n");
  marin::testing::write_text(d.str("sub/utils.py"),
                             "def choices(doc):\n    return [c.upper() for c in doc['choices']]\n");
  marin::testing::write_text(
      d.str("mid.yaml"),
      "include: sub/base.yaml\ndoc_to_text: \"mid: {{question}}\"\ntarget_delimiter: \"|\"\n");
  marin::testing::write_text(d.str("utils.py"),
                             "def process_docs(ds):\n"
                             "    return ds.map(lambda d: {'question': d['question'] + '!'})\n");
  marin::testing::write_text(d.str("top.yaml"),
                             "include: [mid.yaml, sub/base.yaml]\ntask: top\n"
                             "process_docs: !function utils.process_docs\n");

  // Without --trust-task-code: both functions refused at once, each naming its key and file.
  Outcome o = render(d.str("top.yaml"));
  expect_clear(o, "top.yaml", "pass --trust-task-code");
  EXPECT_NE(o.error.find("doc_to_choice: !function utils.choices"), std::string::npos) << o.error;
  EXPECT_NE(o.error.find(d.str("sub/utils.py")), std::string::npos) << o.error;
  EXPECT_NE(o.error.find("process_docs: !function utils.process_docs"), std::string::npos)
      << o.error;

  eval::RenderOptions ro;
  ro.trust_task_code = true;
  const eval::TaskItems t = eval::load_task(d.str("top.yaml"), ro);
  EXPECT_EQ(t.name, "top");
  ASSERT_EQ(t.items.size(), 2u);
  // mid's doc_to_text and target_delimiter (listed first) win over base's; base's description
  // and data stay; process_docs (top's) ran before the templates; base's utils gave the choices.
  EXPECT_EQ(t.items[0].context, "from base\nmid: Q?!");
  EXPECT_EQ(t.target_delimiter, "|");
  EXPECT_EQ(t.items[1].choices, (std::vector<std::string>{"C", "D"}));
  EXPECT_EQ(t.items[1].gold, std::vector<int>{1});
  EXPECT_EQ(t.header["config"]["process_docs"], "!function utils.process_docs");

  // A function that raises: one line naming the key and the document.
  marin::testing::write_text(d.str("utils.py"),
                             "def process_docs(ds):\n    raise KeyError('nope')\n");
  o = render(d.str("top.yaml"));  // untrusted: refused before anything runs
  EXPECT_NE(o.error.find("--trust-task-code"), std::string::npos) << o.error;
  try {
    eval::load_task(d.str("top.yaml"), ro);
    ADD_FAILURE() << "a raising process_docs rendered";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("top.yaml: process_docs: split 'test': the task's function process_docs "
                     "raised KeyError: 'nope'"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find("Traceback"), std::string::npos) << m;
  }
  // An include cycle ends with a clear error.
  marin::testing::write_text(d.str("cycle.yaml"), "include: cycle.yaml\ntask: c\n");
  expect_clear(render(d.str("cycle.yaml")), "cycle.yaml", "include: nested more than 16 deep");
  // repeats: 1 is the default and accepted; process_results needs --trust-task-code (what it
  // does: tests/eval/test_task_process_results.cpp).
  marin::testing::write_text(
      d.str("rep.yaml"), "include: top.yaml\nrepeats: 1\nprocess_results: !function utils.pr\n");
  o = render(d.str("rep.yaml"));
  EXPECT_NE(o.error.find("process_results: !function utils.pr runs the task's own Python"),
            std::string::npos)
      << o.error;
  EXPECT_EQ(o.error.find("repeats: "), std::string::npos) << o.error;  // accepted
}

// Task code imports Hugging Face `datasets` (hellaswag's utils.py: `import datasets`, for the
// type of process_docs's argument): it gets marin's stand-in, Dataset being the documents the
// renderer passes, whether or not the real package is installed; what the stand-in lacks
// (load_dataset, the Hub) is an error naming it.
TEST(HarnessYaml, TaskCodeImportsDatasetsAsTheHarnessesDo) {
  TempDir d("hdatasets");
  write_docs(d);
  marin::testing::write_text(
      d.str("utils.py"),
      "import datasets\nfrom datasets import Dataset\n\n"
      "def process_docs(dataset: datasets.Dataset) -> datasets.Dataset:\n"
      "    rows = [dict(r, question=r['question'] + '!') for r in dataset]\n"
      "    return Dataset.from_list(rows).map(lambda d: {'n': len(d['choices'])})\n\n"
      "def hub(dataset):\n    return datasets.load_dataset('x')\n");
  marin::testing::write_text(
      d.str("t.yaml"),
      task_yaml("{{question}} {{n}}", "process_docs: !function utils.process_docs\n"));
  eval::RenderOptions ro;
  ro.trust_task_code = true;
  const eval::TaskItems t = eval::load_task(d.str("t.yaml"), ro);
  ASSERT_EQ(t.items.size(), 1u);
  EXPECT_EQ(t.items[0].context, "Q?! 2");
  marin::testing::write_text(d.str("hub.yaml"),
                             task_yaml("{{question}}", "process_docs: !function utils.hub\n"));
  expect_clear(render_with(d.str("hub.yaml"), ro), "hub.yaml",
               "datasets.load_dataset is not available to task code in marin");
}

// Every refusal of a file is in one message (not one per run), each naming the key and value.
TEST(HarnessYaml, EveryRefusalOfAFileInOneMessage) {
  TempDir d("hrefusals");
  write_docs(d);
  marin::testing::write_text(
      d.str("bad.yaml"),
      task_yaml("{{question}}",
                "use_prompt: x\nfewshot_config:\n  sampler: balanced\nrepeats: 2\n"
                "target_delimiter: 3\nmetric_list:\n  - metric: f1\n"
                "metadata: [1]\nvalidation_split: nosplit\n"));
  const Outcome o = render(d.str("bad.yaml"));
  for (const char* want :
       {"key 'use_prompt' is not supported", "validation_split: split 'nosplit' is not in",
        "target_delimiter: expected a string, got 3",
        "fewshot_config: only sampler: default or first_n is supported, got {'sampler': "
        "'balanced'}",
        "metric_list[0]: metric 'f1' is not supported for output_type multiple_choice",
        "repeats: 2: only 1 (the default) is supported for multiple_choice",
        "metadata: expected a mapping"})
    expect_clear(o, "bad.yaml", want);
}

// --task-dir indexes every YAML below it by task, tag and group names (the harness's TaskManager
// with --include_path), not by file name.
TEST(HarnessIndex, NamesAreTaskTagAndGroupNames) {
  TempDir d("hindex");
  fs::create_directories(d.str("a/deep"));
  fs::create_directories(d.str("b"));
  write_docs(d);
  marin::testing::write_text(d.str("a/deep/file_one.yaml"),
                             task_yaml("{{question}}", "tag: [fam, other]\n", "../../docs.jsonl")
                                 .replace(0, 11, "task: first"));
  marin::testing::write_text(
      d.str("b/file_two.yaml"),
      task_yaml("{{question}}", "tag: fam\n", "../docs.jsonl").replace(0, 11, "task: second"));
  marin::testing::write_text(d.str("b/_template_yaml"),
                             "output_type: multiple_choice\n");  // not a .yaml: ignored
  marin::testing::write_text(d.str("b/base.yaml"),
                             "doc_to_target: answer\n");  // no task: only included
  marin::testing::write_text(d.str("b/grp.yaml"), "group: grp\ntask: [first, second]\n");
  const std::vector<std::string> dirs{d.str("a"), d.str("b")};
  EXPECT_EQ(eval::resolve_task_files({"second", "first"}, dirs),
            (std::vector<std::string>{d.str("b/file_two.yaml"), d.str("a/deep/file_one.yaml")}));
  EXPECT_EQ(eval::resolve_task_files({"fam"}, dirs),
            (std::vector<std::string>{d.str("a/deep/file_one.yaml"), d.str("b/file_two.yaml")}));
  EXPECT_EQ(eval::load_task(eval::resolve_task_files({"other"}, dirs).at(0), {}).name, "first");
  auto error = [&](const std::string& name) {
    try {
      eval::resolve_task_files({name}, dirs);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::vector<eval::TaskGroup>
      groups;  // a group name is its tasks (tests/eval/test_task_groups.cpp)
  EXPECT_EQ(eval::resolve_task_files({"grp"}, dirs, &groups),
            (std::vector<std::string>{d.str("a/deep/file_one.yaml"), d.str("b/file_two.yaml")}));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].members, (std::vector<std::string>{"first", "second"}));
  EXPECT_NE(error("file_one").find("no task, tag or group 'file_one'"), std::string::npos)
      << error("file_one");
  marin::testing::write_text(d.str("b/again.yaml"),
                             task_yaml("{{question}}").replace(0, 11, "task: first"));
  EXPECT_NE(error("first").find("'first' is defined by several files"), std::string::npos)
      << error("first");
}

// --dataset-root: a Hub id's local copy at DIR/P/N/, else DIR/P/data/, else DIR/P/; split S from
// S.<ext> or S-*.<ext> in name order (jsonl, json, jsonl.gz); Parquet and a missing copy are
// refused naming what was looked for.
TEST(HarnessData, DatasetRootResolvesHubLayouts) {
  TempDir d("hdata");
  fs::create_directories(d.str("root/org/ds/cfg"));
  fs::create_directories(d.str("root/org/ds/data"));
  marin::testing::write_text(
      d.str("root/org/ds/cfg/test-00000.jsonl"),
      "{\"question\": \"Q?\", \"choices\": [\"a\", \"b\"], \"answer\": 1}\n");
  ASSERT_EQ(testing::run_shell("printf '{\"question\": \"S?\", \"choices\": [\"x\", \"y\"], "
                               "\"answer\": 0}\\n' | gzip > " +
                               d.str("root/org/ds/cfg/test-00001.jsonl.gz"))
                .code,
            0);
  marin::testing::write_text(
      d.str("root/org/ds/cfg/train.json"),
      "[{\"question\": \"T?\", \"choices\": [\"x\", \"y\"], \"answer\": 0}]");
  marin::testing::write_text(d.str("root/org/ds/data/test-00000-of-00001.parquet"), "PAR1");
  marin::testing::write_text(
      d.str("root/org/ds/data/train.jsonl"),
      "{\"question\": \"T?\", \"choices\": [\"x\", \"y\"], \"answer\": 0}\n");
  const std::string body =
      "test_split: test\ntraining_split: train\nnum_fewshot: 1\noutput_type: multiple_choice\n"
      "doc_to_choice: choices\ndoc_to_target: answer\ndoc_to_text: \"{{question}}\"\n";
  marin::testing::write_text(d.str("named.yaml"),
                             "task: named\ndataset_path: org/ds\ndataset_name: cfg\n" + body);
  eval::RenderOptions ro;
  ro.dataset_root = d.str("root");
  const eval::TaskItems t = eval::load_task(d.str("named.yaml"), ro);
  ASSERT_EQ(t.items.size(), 2u);  // test-00000.jsonl, then test-00001.jsonl.gz
  EXPECT_EQ(t.items[0].context, "T? x\n\nQ?");
  EXPECT_EQ(t.items[1].context, "T? x\n\nS?");
  EXPECT_EQ(t.items[1].gold, std::vector<int>{0});

  // No dataset_name: DIR/P/data/ is used; its Parquet file goes to marin's Parquet reader,
  // which refuses this one (4 bytes) naming it (real files: ParquetSplitsAreReadByMarinsReader).
  marin::testing::write_text(d.str("plain.yaml"), "task: plain\ndataset_path: org/ds\n" + body);
  const Outcome bad = render_with(d.str("plain.yaml"), ro);
  EXPECT_NE(bad.error.find("test-00000-of-00001.parquet"), std::string::npos) << bad.error;
  marin::testing::write_text(d.str("missing.yaml"),
                             "task: m\ndataset_path: org/none\ndataset_name: c\n" + body);
  expect_clear(render_with(d.str("missing.yaml"), ro), "missing.yaml",
               "no local copy of 'org/none' (c): looked for " + d.str("root") + "/org/none/c, " +
                   d.str("root") + "/org/none/data, " + d.str("root") + "/org/none");
  expect_clear(render(d.str("missing.yaml")), "missing.yaml", "give --dataset-root DIR");
}

// Parquet splits (--dataset-root) are read by marin's own Parquet reader, every column of a row
// becoming a field of the document (null stays null, an INT32 an integer), in files an npm writer
// made (scripts/parquet_write.sh … task: hyparquet-writer).
TEST(HarnessData, ParquetSplitsAreReadByMarinsReader) {
  TempDir d("hparquet");
  const std::string script = std::string(MARIN_SOURCE_DIR) + "/scripts/parquet_write.sh";
  const auto fetch = testing::run_shell(script + " fetch");
  if (fetch.code != 0)
    GTEST_SKIP() << "node, npm or the npm registry is unavailable: " << fetch.out;
  marin::testing::write_text(
      d.str("in.jsonl"),
      "{\"text\": \"In the beginning\"}\n{\"text\": null}\n{\"text\": \"And God said\"}\n"
      "{\"text\": \"Let there be light\"}\n{\"text\": \"caf\u00e9\"}\n");
  const auto w =
      testing::run_shell(script + " write " + d.str("in.jsonl") + " " + d.str("pq") + " task");
  ASSERT_EQ(w.code, 0) << w.out;
  fs::create_directories(d.str("root/org/pq/data"));
  fs::copy_file(d.str("pq/task.parquet"), d.str("root/org/pq/data/test-00000-of-00001.parquet"));
  marin::testing::write_text(
      d.str("pq.yaml"),
      "task: pq\ndataset_path: org/pq\ntest_split: test\noutput_type: loglikelihood\n"
      "doc_to_text: \"{{req}}\"\ndoc_to_target: \"{{' ' ~ (text or 'none')}}\"\n");
  eval::RenderOptions ro;
  ro.dataset_root = d.str("root");
  const eval::TaskItems t = eval::load_task(d.str("pq.yaml"), ro);
  ASSERT_EQ(t.items.size(), 5u);
  EXPECT_EQ(t.items[0].context, "In the beginning");
  EXPECT_EQ(t.items[1].context, "");  // req: "" where text is null
  EXPECT_EQ(t.items[1].target, " none");
  EXPECT_TRUE(t.items[1].doc["text"].is_null());
  EXPECT_EQ(t.items[3].target, " Let there be light");
  EXPECT_EQ(t.items[4].doc, json({{"text", "caf\u00e9"}, {"req", "caf\u00e9"}}));
  // dataset_path: parquet with data_files reads the same way; an INT32 column is an integer.
  marin::testing::write_text(
      d.str("files.yaml"),
      "task: files\ndataset_path: parquet\ndataset_kwargs:\n  data_files:\n"
      "    test: pq/task-int.parquet\ntest_split: test\noutput_type: loglikelihood\n"
      "doc_to_text: \"{{req}} {{n + 1}}\"\ndoc_to_target: \" x\"\n");
  const eval::TaskItems f = eval::load_task(d.str("files.yaml"), ro);
  ASSERT_EQ(f.items.size(), 5u);
  EXPECT_EQ(f.items[2].context, "And God said 3");
  EXPECT_EQ(f.items[2].doc, json({{"text", "And God said"}, {"req", "And God said"}, {"n", 2}}));
}

void write_checkpoint(const std::string& dir, uint64_t seed);  // with a tokenizer.json

// Parquet splits with the column types of real Hub task data (scripts/parquet_write.sh … cols):
// an MMLU-like split (question, subject, choices list<string>, answer int64) from each writer
// renders with MMLU's template, its gold from the integer answer, and is scored by `marin eval
// --dataset-root`; a column of a type the reader does not read is refused naming file, column
// and type.
TEST(HarnessData, AnMmluLikeParquetSplitWithListsAndIntegersIsScored) {
  TempDir d("hmmlu");
  const std::string script = std::string(MARIN_SOURCE_DIR) + "/scripts/parquet_write.sh";
  const auto fetch = testing::run_shell(script + " fetch");
  if (fetch.code != 0)
    GTEST_SKIP() << "node, npm or the npm registry is unavailable: " << fetch.out;
  const auto w = testing::run_shell(script + " write /dev/null " + d.str("pq") + " cols");
  ASSERT_EQ(w.code, 0) << w.out;
  const std::string body =
      "test_split: test\noutput_type: multiple_choice\n"
      "doc_to_text: \"{{question.strip()}}\\nA. {{choices[0]}}\\nB. {{choices[1]}}\\nC. "
      "{{choices[2]}}\\nD. {{choices[3]}}\\nAnswer:\"\n"
      "doc_to_choice: [\"A\", \"B\", \"C\", \"D\"]\ndoc_to_target: answer\n";
  std::string tasks;
  for (const std::string writer : {"rust", "hyparquet"}) {
    fs::create_directories(d.str("root/org/mmlu_" + writer + "/all"));
    fs::copy_file(d.str("pq/mmlu-" + writer + ".parquet"),
                  d.str("root/org/mmlu_" + writer + "/all/test-00000-of-00001.parquet"));
    const std::string yaml = d.str("mmlu_" + writer + ".yaml");
    marin::testing::write_text(yaml, "task: mmlu_" + writer + "\ndataset_path: org/mmlu_" + writer +
                                         "\ndataset_name: all\n" + body);
    tasks += (tasks.empty() ? "" : ",") + yaml;
    eval::RenderOptions ro;
    ro.dataset_root = d.str("root");
    const eval::TaskItems t = eval::load_task(yaml, ro);
    ASSERT_EQ(t.items.size(), 3u) << writer;
    EXPECT_EQ(t.items[0].context, "What is 2 + 2?\nA. 3\nB. 4\nC. 5\nD. 22\nAnswer:") << writer;
    EXPECT_EQ(t.items[0].gold, std::vector<int>{1});
    EXPECT_EQ(t.items[1].gold, std::vector<int>{0});
    EXPECT_EQ(t.items[2].gold, std::vector<int>{3});
    EXPECT_EQ(t.items[2].doc, json({{"question", "Water boils at (C)?"},
                                    {"subject", "physics"},
                                    {"choices", {"50", "75", "90", "100"}},
                                    {"answer", 3}}));
  }
  // Scored end to end by a tiny checkpoint.
  write_checkpoint(d.str("ck"), 5);
  const auto r =
      testing::run("eval --checkpoint " + d.str("ck") + " --tasks " + tasks + " --dataset-root " +
                   d.str("root") + " --quiet --bootstrap-iters 10 --json " + d.str("r.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = json::parse(read_file(d.str("r.json")));
  for (const std::string task : {"mmlu_rust", "mmlu_hyparquet"}) {
    const json& res = j["results"][task];
    EXPECT_EQ(res["sample_len"], 3) << task;
    const double acc = res["acc,none"].get<double>();
    EXPECT_TRUE(acc == 0 || acc == 1.0 / 3 || acc == 2.0 / 3 || acc == 1) << acc;
  }
  // The same model scores both writers' files the same.
  EXPECT_EQ(j["results"]["mmlu_rust"]["acc,none"], j["results"]["mmlu_hyparquet"]["acc,none"]);

  // Refused: an INT32 DATE and an INT64 TIMESTAMP, both named in one message.
  fs::copy_file(d.str("pq/refused-hyparquet.parquet"), d.str("refused.parquet"));
  marin::testing::write_text(
      d.str("refused.yaml"),
      "task: refused\ndataset_path: parquet\ndataset_kwargs:\n  data_files:\n"
      "    test: refused.parquet\ntest_split: test\noutput_type: loglikelihood\n"
      "doc_to_text: \"{{ok}}\"\ndoc_to_target: \" x\"\n");
  eval::RenderOptions ro;
  ro.dataset_root = d.str("root");
  expect_clear(render_with(d.str("refused.yaml"), ro), "refused.parquet",
               "Parquet columns of types marin does not read: day (INT32 (DATE)), ts (INT64 "
               "(TIMESTAMP_MILLIS))");
}

// A tiny checkpoint with every tensor moved off its init, so the logits are not uniform and
// greedy matches mean something, and a 512-token BPE trained on the fixture's KJV text as its
// tokenizer.json.
void write_checkpoint(const std::string& dir, uint64_t seed) {
  marin::testing::write_moved_checkpoint(dir, "tiny", seed);
  std::vector<std::string> texts;
  eval::for_each_jsonl_document(
      std::string(MARIN_SOURCE_DIR) + "/data/fixture/bible_kjv/train-00000.jsonl",
      [&](const text_corpus::Document& doc) { texts.push_back(doc.text); });
  Tokenizer::train(texts, 512).save_json(dir + "/tokenizer.json");
}

// Python's str.rstrip() for the ASCII whitespace of these texts.
size_t trailing_space(const std::string& s) {
  size_t n = 0;
  while (n < s.size() && std::isspace(static_cast<unsigned char>(s[s.size() - 1 - n]))) ++n;
  return n;
}

// issue 40: a lambada-style loglikelihood task (the target is " word", target_delimiter left at
// its default " ") scored by `marin eval` equals the harness's rule computed through
// modeling_marin.py: per-item log-likelihoods, is_greedy, perplexity = exp(−mean ll) and acc.
// Before the fix marin scored target_delimiter + target ("  word"): one token more per item.
TEST(HarnessLoglikelihood, MetricsEqualTheHarnessThroughModelingMarin) {
  if (testing::run_shell("/usr/bin/python3 -c 'import torch, numpy'").code != 0)
    GTEST_SKIP() << "python3-torch and python3-numpy are not installed";
  TempDir d("hll");
  write_checkpoint(d.str("ck"), 11);
  auto r = testing::run("export --checkpoint " + d.str("ck") + " --out " + d.str("hf"));
  ASSERT_EQ(r.code, 0) << r.out;

  std::string docs;
  for (const char* t :
       {"In the beginning God created the heaven and the earth.",
        "And the earth was without form, and void; and darkness was upon the face of the deep.",
        "And God said, Let there be light: and there was light.",
        "And God saw the light, that it was good: and God divided the light from the darkness.",
        "And God called the light Day, and the darkness he called Night.",
        "And the evening and the morning were the first day."})
    docs += json({{"text", t}}).dump() + "\n";
  marin::testing::write_text(d.str("lambada.jsonl"), docs);
  const std::string data =
      "dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: lambada.jsonl\n"
      "test_split: test\noutput_type: loglikelihood\n";
  // lambada_openai's templates, and a variant whose context ends in the space the harness moves
  // into the continuation.
  marin::testing::write_text(d.str("lam.yaml"),
                             "task: lam\n" + data +
                                 "doc_to_text: \"{{text.split(' ')[:-1]|join(' ')}}\"\n"
                                 "doc_to_target: \"{{' '+text.split(' ')[-1]}}\"\n");
  marin::testing::write_text(d.str("lam_space.yaml"),
                             "task: lam_space\n" + data +
                                 "doc_to_text: \"{{text.split(' ')[:-1]|join(' ')}} \"\n"
                                 "doc_to_target: \"{{text.split(' ')[-1]}}\"\n");
  r = testing::run("eval --checkpoint " + d.str("ck") + " --tasks " + d.str("lam.yaml") + "," +
                   d.str("lam_space.yaml") + " --log-samples --quiet --bootstrap-iters 10" +
                   " --json " + d.str("r.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = json::parse(read_file(d.str("r.json")));

  const Tokenizer tok = Tokenizer::from_json(d.str("ck/tokenizer.json"));
  for (const char* task : {"lam", "lam_space"}) {
    SCOPED_TRACE(task);
    json req = {{"max_length", ModelConfig::preset("tiny").seq_len},
                {"eot", *tok.eos()},
                {"requests", json::array()},
                {"encodings", json::object()}};
    auto add = [&](const std::string& s) { req["encodings"][s] = tok.encode(s); };
    const json& samples = j["samples"][task];
    ASSERT_EQ(samples.size(), 6u);
    for (const json& smp : samples) {
      const std::string ctx = smp["context"], target = smp["target"];
      req["requests"].push_back({ctx, target});
      const size_t n = trailing_space(ctx);
      const std::string c = ctx.substr(0, ctx.size() - n);
      add(c);
      add(c + ctx.substr(c.size()) + target);
      add(target);
    }
    marin::testing::write_text(d.str("req.json"), req.dump());
    r = testing::run_shell("PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1 /usr/bin/python3 " +
                           std::string(MARIN_SOURCE_DIR) + "/tests/support/harness_ll.py " +
                           d.str("hf") + " " + d.str("req.json") + " " + d.str("py.json"));
    ASSERT_EQ(r.code, 0) << r.out;
    const json py = json::parse(read_file(d.str("py.json")));
    for (size_t i = 0; i < samples.size(); ++i) {
      const double ll = samples[i]["loglikelihoods"][0].get<double>();
      EXPECT_NEAR(ll, py["ll"][i].get<double>(), 1e-3 * std::max(1.0, std::abs(ll))) << i;
      EXPECT_EQ(samples[i]["is_greedy"][0].get<bool>(), py["is_greedy"][i].get<bool>()) << i;
    }
    // --log-samples: samples_<task>_<date>.jsonl beside the report, in the harness's layout.
    std::string samples_file;
    for (const auto& e : fs::directory_iterator(d.path))
      if (e.path().filename().string().rfind(std::string("samples_") + task + "_2", 0) == 0)
        samples_file = e.path().string();
    ASSERT_FALSE(samples_file.empty());
    std::vector<json> lines;
    const std::string samples_text = read_file(samples_file);
    for (const auto& line : split_lines(samples_text))
      if (!line.empty()) lines.push_back(json::parse(line));
    ASSERT_EQ(lines.size(), samples.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      const json& e = lines[i];
      EXPECT_EQ(e["doc_id"], i);
      EXPECT_TRUE(e["doc"].contains("text"));
      EXPECT_EQ(e["arguments"]["gen_args_0"]["arg_0"], samples[i]["context"]);
      EXPECT_EQ(e["arguments"]["gen_args_0"]["arg_1"], samples[i]["target"]);
      EXPECT_NEAR(std::stod(e["filtered_resps"][0][0].get<std::string>()),
                  samples[i]["loglikelihoods"][0].get<double>(), 1e-9);
      EXPECT_EQ(e["resps"][0][0][1], samples[i]["is_greedy"][0].get<bool>() ? "True" : "False");
      EXPECT_EQ(e["filter"], "none");
      EXPECT_EQ(e["metrics"], json({"acc", "perplexity"}));
      EXPECT_EQ(e["prompt_hash"], py["prompt_hash"][i]);
      EXPECT_EQ(e["target_hash"], py["target_hash"][i]);
      EXPECT_EQ(e["doc_hash"].get<std::string>().size(), 64u);
      // The harness's per-sample perplexity is the item's log-likelihood (aggregated by
      // exp(−mean)).
      EXPECT_DOUBLE_EQ(e["perplexity"].get<double>(),
                       samples[i]["loglikelihoods"][0].get<double>());
    }
    const json& res = j["results"][task];
    EXPECT_EQ(res["alias"], task);
    EXPECT_EQ(res["name"], task);
    EXPECT_EQ(res["sample_len"], 6);
    const double ppl = res["perplexity,none"].get<double>();
    EXPECT_NEAR(ppl, py["perplexity"].get<double>(), 1e-3 * ppl);
    EXPECT_DOUBLE_EQ(res["acc,none"].get<double>(), py["acc"].get<double>());
  }
}

}  // namespace
}  // namespace marin
