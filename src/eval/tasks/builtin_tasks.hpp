#pragma once
// Built-in downstream tasks made from the corpus's held-out text (docs/evaluation.md,
// "Built-in tasks"), written as lm-evaluation-harness tasks (NAME.yaml + NAME.jsonl) so both
// `marin eval --tasks` and the real harness can run them:
//  * lambada_style — last-word prediction over passages whose last word occurs earlier in the
//    passage (LAMBADA's filter), from brown_fiction and bible_web_modern;
//  * cloze_definitions — headword → its definition among 4 (3 distractors of similar length from
//    the same dictionary), from dict_gcide, dict_foldoc, dict_jargon, dict_devil;
//  * verse_completion — the second half of a modern-English verse among 4 (bible_web_modern);
//  * code_completion — the next line of a held-out Python/Go function among 4 (code_python,
//    code_go).
// Only `valid` shards are read (eval-only domains have nothing else), and every random draw is
// keyed by (seed, task, item id), so a corpus and a seed give the same files byte for byte.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace marin::eval {

struct BuildTasksOptions {
  std::string corpus;              // ROOT/<domain>/valid-NNNNN.jsonl
  std::string out;                 // directory for NAME.yaml, NAME.jsonl, tasks.json
  std::vector<std::string> tasks;  // empty: every built-in task whose domains are present
  uint64_t seed = 1234;
  uint64_t max_items = 1000;  // per task (0: all): a seeded subset, kept in corpus order
  int lambada_min_words = 40, lambada_max_words = 120;
};

struct BuiltTask {
  std::string name;
  std::vector<std::string> sources;  // the shards read (ROOT-relative)
  uint64_t candidates = 0, items = 0;
  double chance = 0;         // multiple choice: mean 1/choices (0 for lambada_style)
  nlohmann::json baselines;  // lambada_style: most-frequent-earlier-word accuracy
};

const std::vector<std::string>& builtin_task_names();
// Writes the tasks and OUT/tasks.json (what was built from where). marin::Error for an unknown
// task, a requested task whose domains have no valid shards (naming the directories looked in),
// or a task with fewer than 4 candidates for its choices.
std::vector<BuiltTask> build_tasks(const BuildTasksOptions& o);

// The most-frequent-earlier-word guess for a LAMBADA-style passage (docs/evaluation.md): the
// most frequent normalised word of the context that is not a function word (ties: the latest),
// "" when there is none.
std::string most_frequent_earlier_word(const std::string& context);

}  // namespace marin::eval
