// marin ladder: trains the rungs of a scaling ladder (recipe.md §9, docs/scaling.md) in order,
// resumably, and writes DIR/ladder.json with every rung's compute and loss curve.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "core/error.hpp"
#include "optim/hparams.hpp"
#include "scaling/ladder.hpp"

namespace marin::cli {
namespace {

struct LadderCli {
  std::string config, out;
  DataOptions d;  // replaces the file's [data] when given
  bool dry_run = false, canaries = false;
  std::vector<std::string> runs, imports;
};

void print_plan(const scaling::LadderConfig& c) {
  fmt::print(
      "ladder {} ({}): {} tokens per active parameter, {} evaluations per rung, learning rates "
      "{}× the rule\n",
      c.name, c.path, fmt::join(c.budgets, ", "), scaling::kFractions, c.lr_multiplier);
  fmt::print(
      "{:<24} {:>6} {:>4} {:>5} {:>5} {:>13} {:>6} {:>7} {:>8} {:>12} {:>11} {:>10} {:>10}\n",
      "run", "d", "L", "heads", "batch", "active", "tpp", "S", "steps", "tokens", "C (no head)",
      "muonh_lr", "adam_lr");
  double total = 0;
  for (auto& r : c.rungs) {
    const double tokens = double(r.steps) * double(r.batch) * double(r.model.seq_len);
    const HyperParams h = heuristic_hparams(r.model.hidden_dim, r.batch, r.model.seq_len, r.steps);
    fmt::print(
        "{:<24} {:>6} {:>4} {:>5} {:>5} {:>13} {:>6g} {:>7} {:>8} {:>12.4e} {:>11.4e} {:>10.3e} "
        "{:>10.3e}\n",
        r.run + (r.canary ? " (canary)" : ""), r.model.hidden_dim, r.model.num_layers,
        r.model.num_heads, r.batch, r.active_params, r.tokens_per_param, r.model.seq_len, r.steps,
        tokens, r.compute_per_step * double(r.steps), h.muonh_lr * c.lr_multiplier,
        h.adam_lr * c.lr_multiplier);
    total += r.compute_per_step * double(r.steps);
  }
  fmt::print("{} runs, C = {:.4e} FLOPs in all (without the LM head)\n", c.rungs.size(), total);
}

int run_ladder(const LadderCli& a) {
  scaling::LadderConfig c = scaling::LadderConfig::load(a.config);
  if (!a.d.rows.empty() && !a.d.data.empty()) fail("give either --rows or --data, not both");
  if (!a.d.rows.empty())
    c.set_rows_data(a.d.rows, a.d.valid_rows);
  else if (!a.d.valid_rows.empty())
    fail("--valid-rows goes with --rows");
  if (!a.d.data.empty()) {
    if (a.d.token_dir.empty()) fail("--data needs --token-dir (the output of `marin tokenize`)");
    c.set_mixture_data(a.d.data, a.d.token_dir, a.d.tokenizer);
  }
  if (a.dry_run) {
    fmt::print("data: {}\n", c.data_source.is_null() ? std::string("(none: give --rows or --data)")
                                                     : c.data_source.dump());
    print_plan(c);
    return 0;
  }
  scaling::LadderRunOptions o;
  o.out = a.out.empty() ? "runs/ladder-" + c.name : a.out;
  o.canaries = a.canaries;
  o.runs = a.runs;
  o.imports = a.imports;
  const bool done = scaling::train_ladder(c, o);
  fmt::print("{{\"ladder\": \"{}/ladder.json\", \"complete\": {}}}\n", o.out, done);
  return done ? 0 : 3;
}

}  // namespace

MARIN_COMMAND(
    ladder, "ladder",
    "Train a scaling ladder (rungs by the shape rule; resumable) and write ladder.json",
    [](CLI::App& app) -> Runner {
      auto a = std::make_shared<LadderCli>();
      app.add_option("--config", a->config, "ladder TOML file (docs/scaling.md)")->required();
      app.add_option("--out", a->out, "ladder directory (default runs/ladder-<name>)");
      a->d.add(app);
      app.add_flag("--dry-run", a->dry_run,
                   "validate the file and print the rungs (sizes, steps, rates, compute)");
      app.add_flag("--canaries", a->canaries,
                   "also train the canary rungs (after `marin forecast` has registered them)");
      app.add_option("--runs", a->runs,
                     "train only these runs (comma-separated, as --dry-run names them: "
                     "d128-seed0,...); a finished run left out is still recorded")
          ->delimiter(',');
      app.add_option("--import", a->imports,
                     "ladder.json of this ladder from another machine or session (repeatable): "
                     "its finished runs count as done, without their directories");
      return [a] { return run_ladder(*a); };
    });

}  // namespace marin::cli
