#pragma once
// Downstream tasks in the lm-evaluation-harness format (docs/evaluation.md, "Downstream tasks").
//
// A harness task is a YAML file over JSONL documents whose prompts are Jinja2 templates. The
// templates are rendered by the real engine in scripts/render_tasks.py (run with /usr/bin/python3,
// Debian's python3-jinja2 and python3-yaml), which writes a flat JSONL: a header line, then one
// line per document with its final context (few-shot examples included), choices and gold index
// (multiple_choice) or target string (loglikelihood, loglikelihood_rolling). This file reads that
// flat form, and runs the renderer for a YAML task.
//
//   eval::TaskItems t = eval::load_task("tasks/cloze_definitions.yaml", {});
//   // or eval::read_task_items("cloze.rendered.jsonl")
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/tasks/task_groups.hpp"

namespace marin::eval {

enum class OutputType { MultipleChoice, Loglikelihood, LoglikelihoodRolling, GenerateUntil };
const char* output_type_name(OutputType t);

struct TaskItem {
  uint64_t doc_id = 0;               // index in the evaluation split (the harness's doc_id)
  std::string id;                    // the document's "id" field, else doc_id
  std::string context;               // description + few-shot examples + doc_to_text
  std::vector<std::string> choices;  // multiple_choice
  std::vector<int> gold;             // multiple_choice: the gold choice(s) (one unless a list)
  std::string target;                // loglikelihood(_rolling): the continuation / the text
  std::string audit_text;            // what the contamination audit checks
  // multiple_choice with several contexts (multi-input, winogrande): contexts[i] = few-shot
  // prefix + choices[i] (choices holds the contexts alone, whose lengths acc_norm divides by, as
  // the harness does); continuation is scored after each, following target_delimiter.
  std::vector<std::string> contexts;
  std::string continuation;
  // generate_until: the references (doc_to_target as a string, or its list); target is the first.
  std::vector<std::string> targets = {};
  nlohmann::json doc = nullptr;  // the document after process_docs (null when the line has none)
  // The harness's sample hashes (doc_hash, prompt_hash, target_hash: sha256 hex computed by the
  // renderer as the harness computes them); an empty object when the line has none.
  nlohmann::json hashes = nlohmann::json::object();
};

struct GenerationConfig;
struct RenderOptions;

struct TaskItems {
  std::string name;
  std::string file;  // the rendered JSONL
  OutputType type = OutputType::MultipleChoice;
  nlohmann::json version;  // metadata.version (null when absent, as the harness reports it)
  int num_fewshot = 0;
  std::string target_delimiter = " ";  // between context and choice/target (the harness's)
  std::vector<std::string> metrics;    // in metric_list order
  nlohmann::json header;               // the whole header line (config, seed, splits, source)
  // generate_until: generation_kwargs, filter_list, exact_match options, repeats (generation.hpp)
  std::shared_ptr<const GenerationConfig> generation;
  bool multi_input = false;  // multiple_choice items carry contexts + continuation
  std::vector<TaskItem> items;
  // A task with its own process_results (header "process_results"): the options it was rendered
  // with, to run the task's Python again on the model's results (run_task_results).
  std::shared_ptr<const RenderOptions> task_code;

  // xxh64 (hex) of the first n items as they are scored (context, choices, gold, target), one
  // canonical JSON line each: two runs with the same hash scored the same prompts.
  std::string items_hash(size_t n) const;
};

// Reads a rendered task (the output of scripts/render_tasks.py). marin::Error naming file:line
// for a line that is not JSON or lacks a field, an unknown output type or metric, a gold index
// out of range, or an empty choice (acc_norm divides by its length).
TaskItems read_task_items(const std::string& file);

struct RenderOptions {
  std::optional<int> num_fewshot;  // overrides the task's num_fewshot
  int fewshot_seed = 1234;         // the harness's default fewshot_random_seed
  std::string out_dir;  // where the rendered JSONL goes ("": next to nothing, a temp dir)
  std::string python = "/usr/bin/python3";
  std::string script;  // "": $MARIN_RENDER_TASKS, else scripts/render_tasks.py of the source tree
  // The renderer's limits (docs/reliability.md, "Task files"): it gives up after timeout_s
  // (--task-timeout; 0: none) and is killed timeout_s + kKillGraceS after it started; its address
  // space is limited to memory_mb MiB.
  int timeout_s = 120;
  int memory_mb = 4096;
  // Let `!function module.name` run the task's own Python (module.py beside the YAML), as the
  // harness does (--trust-task-code). Without it such a task is refused, naming the key.
  bool trust_task_code = false;
  // Where local copies of Hub datasets are: dataset_path P, dataset_name N resolve to the first of
  // DIR/P/N/, DIR/P/data/, DIR/P/ (--dataset-root; "": a Hub dataset is refused).
  std::string dataset_root;
  // A group's inline task config: entry inline_index of inline_from's `task:` list, over the
  // YAML given to load_task (the registered task it names; the group file itself when none).
  std::string inline_from;
  int inline_index = 0;
  static constexpr int kKillGraceS = 5;
};
// The renderer script that RenderOptions::script = "" resolves to.
std::string render_script_path();
// Renders a harness YAML task with the renderer and reads the result. marin::Error carrying the
// renderer's message (which names the YAML key, template or file:line at fault).
TaskItems load_task(const std::string& yaml, const RenderOptions& opts);

// The task's own process_results and metric_list aggregations (render_tasks.py results) on
// `request` ({"items": [{"doc_id", "doc", "results"}]}): {"per_item": [{metric: value}],
// "values": {metric: aggregate}}. marin::Error with the renderer's message (file, key, document).
nlohmann::json run_task_results(const TaskItems& t, const nlohmann::json& request);

// `--tasks a,b|FILE.yaml|FILE.jsonl`: a path ending in .yaml/.yml is a harness task, .jsonl a
// rendered one, anything else a name looked up in the index of every YAML below the task
// directories (the harness's TaskManager with --include_path: a `task:` name is its file, a
// `tag:` name every file that carries it, in path order, a `group:` name the tasks of its `task:`
// list, recursively: task, tag and group names, and inline task configs, which come back as
// "GROUP.yaml#task[I]" or "GROUP.yaml#task[I]=BASE.yaml" for load_task_file). Each file once, in
// first-named order. `groups` (when given) receives the groups named, members before their
// groups. Refused: a name the index lacks (listing the directories and the files the index could
// not read), a task name that two files define, an inline group config, a group that contains
// itself.
std::vector<std::string> resolve_task_files(const std::vector<std::string>& specs,
                                            const std::vector<std::string>& task_dirs,
                                            std::vector<TaskGroup>* groups = nullptr);
std::vector<std::string> resolve_task_files(const std::vector<std::string>& specs,
                                            const std::string& task_dir);
// A file from resolve_task_files: rendered JSONL read as is, YAML rendered first, and a group's
// inline task config ("GROUP.yaml#task[I]", "GROUP.yaml#task[I]=BASE.yaml") rendered from the
// group file over the task it names.
TaskItems load_task_file(const std::string& file, const RenderOptions& opts);

}  // namespace marin::eval
