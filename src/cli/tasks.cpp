// marin tasks build: the built-in downstream tasks from a corpus's held-out text, written as
// lm-evaluation-harness tasks (docs/evaluation.md, "Built-in tasks").
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <memory>

#include "cli/options.hpp"
#include "eval/tasks/builtin_tasks.hpp"

namespace marin::cli {
namespace {

int run_build(const eval::BuildTasksOptions& o) {
  const auto tasks = eval::build_tasks(o);
  fmt::print("{:<20} {:>10} {:>7} {:>8}  {}\n", "task", "candidates", "items", "chance",
             "sources (valid split)");
  for (const auto& b : tasks.built) {
    fmt::print("{:<20} {:>10} {:>7} {:>8}  {}\n", b.name, b.candidates, b.items,
               b.chance > 0 ? fmt::format("{:.4f}", b.chance) : std::string("-"),
               fmt::join(b.sources, ", "));
    for (const auto& [k, v] : b.baselines.items())
      fmt::print("{:<20} baseline {}: {:.4f}\n", "", k, v.get<double>());
  }
  // One line per task the corpus has no text for: what it needs and where it looked.
  for (const auto& k : tasks.skipped)
    fmt::print("skipped {}: needs {}; {}\n", k.name, k.needs, k.reason);
  fmt::print("wrote {}/{{NAME.yaml, NAME.jsonl, tasks.json}}\n", o.out);
  return 0;
}

}  // namespace

MARIN_COMMAND(
    tasks, "tasks",
    "Build the built-in downstream tasks (lm-evaluation-harness YAML + JSONL) from "
    "held-out corpus text",
    [](CLI::App& app) -> Runner {
      auto o = std::make_shared<eval::BuildTasksOptions>();
      app.require_subcommand(1);
      auto* build = app.add_subcommand(
          "build",
          "Write OUT/NAME.yaml + OUT/NAME.jsonl for lambada_style (prose), cloze_definitions "
          "(dictionary entries), verse_completion (one verse or sentence a line), "
          "code_completion (source code) from the valid split of any domains of --corpus");
      build->add_option("--corpus", o->corpus, "text corpus (marin corpus build)")->required();
      build->add_option("--out", o->out, "output directory")->required();
      build->add_option("--tasks", o->tasks, "only these tasks (default: all)")->delimiter(',');
      build->add_option("--seed", o->seed, "seed of the distractors and subsets")
          ->capture_default_str()
          ->check(seed_range());
      build
          ->add_option("--max-items", o->max_items,
                       "items per task at most (a seeded subset; 0: all)")
          ->capture_default_str();
      return [o] { return run_build(*o); };
    });

}  // namespace marin::cli
