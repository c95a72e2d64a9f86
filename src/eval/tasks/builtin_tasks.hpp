#pragma once
// Built-in downstream tasks made from the corpus's held-out text (docs/evaluation.md,
// "Built-in tasks"), written as lm-evaluation-harness tasks (NAME.yaml + NAME.jsonl) so both
// `marin eval --tasks` and the real harness can run them. Each task needs a kind of text, which a
// predicate recognises in a document of any domain (so any corpus's domain names work):
//  * lambada_style — last-word prediction over passages whose last word occurs earlier in the
//    passage (LAMBADA's filter), from prose;
//  * cloze_definitions — headword → its definition among 4 (3 distractors of similar length from
//    the same domain), from dictionary entries;
//  * verse_completion — the second half of a verse (or sentence) among 4, from prose with one
//    verse or sentence a line;
//  * code_completion — the next line of a held-out function among 4, from source code.
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
  std::vector<std::string> tasks;  // empty: every built-in task the corpus has text for
  uint64_t seed = 1234;
  uint64_t max_items = 1000;  // per task (0: all): a seeded subset, kept in corpus order
  int lambada_min_words = 40, lambada_max_words = 120;
};

struct BuiltTask {
  std::string name;
  std::string needs;                 // the kind of text it is made from
  std::vector<std::string> domains;  // the domains that had such text
  std::vector<std::string> sources;  // the shards it came from (ROOT-relative)
  uint64_t candidates = 0, items = 0;
  double chance = 0;         // multiple choice: mean 1/choices (0 for lambada_style)
  nlohmann::json baselines;  // lambada_style: most-frequent-earlier-word accuracy
};

// A task the corpus has no text for (or whose text gave no item).
struct SkippedTask {
  std::string name, needs;
  std::vector<std::string> domains;  // the domains looked at: every one with valid shards
  std::string reason;
};

struct BuiltTasks {
  std::vector<BuiltTask> built;
  std::vector<SkippedTask> skipped;
};

const std::vector<std::string>& builtin_task_names();
// Writes the tasks and OUT/tasks.json (what was built from where, and what was skipped and why).
// A task with no suitable text is skipped, unless --tasks asked for it. marin::Error for an
// unknown task, a requested task that cannot be built, or when no task can be built (naming the
// corpus, the domains looked at and what each task needs).
BuiltTasks build_tasks(const BuildTasksOptions& o);

// The most-frequent-earlier-word guess for a LAMBADA-style passage (docs/evaluation.md): the
// most frequent normalised word of the context that is not a function word (ties: the latest),
// "" when there is none.
std::string most_frequent_earlier_word(const std::string& context);

}  // namespace marin::eval
