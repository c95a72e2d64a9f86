// marin train: a new run, a resumed run (--resume RUN) or a fork of a checkpoint with changed
// settings (--fork-from CKPT). Prints a live progress line; writes RUN/metrics.jsonl.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "data/mixture.hpp"
#include "report/report_hook.hpp"
#include "scaling/forecast_hook.hpp"
#include "train/checkpoint.hpp"
#include "train/train_option_table.hpp"
#include "train/trainer.hpp"

namespace marin::cli {
namespace {

struct TrainCli {
  ModelOptions model;
  DataOptions d;
  std::string out, init, resume, fork_from;
  bool overwrite = false;
  // The table's options as typed (train_option_table.hpp), by flag; only given ones are applied.
  std::map<std::string, std::string> text;
  std::vector<int64_t> inject_nan, inject_nan_param, inject_inf_state;
  CLI::App* app = nullptr;
  bool given(const char* flag) const { return app->count(flag) > 0; }
};

// Applies the options given on the command line to `o`: the table's options that were given
// (the others keep o's values: TrainOptions' defaults for a new run, the parent's for a fork, the
// run's own on --resume), and the model and data unless only_given and not given.
void apply(const TrainCli& a, TrainOptions& o, bool only_given) {
  auto want = [&](const char* flag) { return !only_given || a.given(flag); };
  if (want("--preset") || want("--config") || want("--set")) {
    if (!only_given || a.given("--set")) {
      ModelConfig c = only_given ? o.model : a.model.resolve();
      if (only_given) apply_overrides(c, a.model.sets);
      c.validate();
      o.model = c;
    }
    if (!only_given) o.preset = a.model.preset;
  }
  if ((want("--rows") || want("--tokens")) && !a.d.rows.empty())
    o.data = {{"kind", "rows"}, {"path", a.d.rows}};
  if (want("--data") && !a.d.data.empty()) {
    if (a.d.token_dir.empty()) fail("--data needs --token-dir (the output of `marin tokenize`)");
    // The mixture is embedded in the run's options, so the run does not depend on the file.
    const MixtureConfig mix = MixtureConfig::load(a.d.data);
    o.data = {{"kind", "mixture"}, {"tokens", a.d.token_dir}, {"mixture", mix.to_json()}};
    // In-distribution validation: the valid split of every domain the mixture trains on.
    nlohmann::json domains = nlohmann::json::array();
    for (auto& src : mix.sources) domains.push_back(src.domain);
    if (!only_given || !(a.given("--valid-rows") || a.given("--valid-tokens")))
      o.valid = {{"kind", "valid"}, {"tokens", a.d.token_dir}, {"domains", domains}};
  }
  if (want("--tokenizer")) o.tokenizer = a.d.tokenizer;
  if ((want("--valid-rows") || want("--valid-tokens")) &&
      (!a.d.valid_rows.empty() || a.d.data.empty()))
    o.valid = a.d.valid_rows.empty() ? nlohmann::json()
                                     : nlohmann::json{{"kind", "rows"}, {"path", a.d.valid_rows}};
  for (const TrainOption& s : train_option_table())
    if (s.flag && a.given(s.flag))
      s.set(o, s.parse(s.kind == TrainOption::Bool ? "" : a.text.at(s.flag)));
  o.overwrite = a.overwrite;
  o.inject_nan_grad_steps = a.inject_nan;
  o.inject_nan_param_steps = a.inject_nan_param;
  o.inject_inf_state_steps = a.inject_inf_state;
}

// Besides the table's options that may change on resume: --resume itself, --help, the process's
// --threads and --progress-every, and the testing aids (fault injection).
const std::vector<std::string> kAlwaysAccepted = {"--resume",          "--help",
                                                  "--threads",         "--progress-every",
                                                  "--inject-nan-grad", "--inject-nan-param",
                                                  "--inject-inf-state"};

// --resume applies the options the table lets change (OnResume) and refuses every other one by
// name: a flag is never silently dropped. (Those a forecast binds are checked by the trainer,
// which reads the run's state.)
void refuse_unresumable(const TrainCli& a) {
  std::vector<std::string> refused, resumable;
  for (const TrainOption& s : train_option_table())
    if (s.flag && s.on_resume != OnResume::No) resumable.push_back(s.flag);
  for (const CLI::Option* opt : a.app->get_options()) {
    if (opt->count() == 0 || opt->get_lnames().empty()) continue;
    const std::string name = "--" + opt->get_lnames().front();
    if (std::find(kAlwaysAccepted.begin(), kAlwaysAccepted.end(), name) != kAlwaysAccepted.end())
      continue;
    const TrainOption* s = find_train_option(name);
    if (!s || s->on_resume == OnResume::No) refused.push_back(name);
  }
  if (!refused.empty())
    fail(
        "{} cannot change on --resume (the run keeps its own; --resume may change {}); use "
        "--fork-from CHECKPOINT --out NEW_RUN to start a new run with other options",
        fmt::join(refused, ", "), fmt::join(resumable, ", "));
}

// The flags of the option table, each with its range, help and default (TrainOptions' own).
void add_table_options(CLI::App& app, TrainCli& a) {
  const TrainOptions defaults;
  for (const TrainOption& s : train_option_table()) {
    if (!s.flag) continue;
    std::string help = s.help;
    if (s.on_resume == OnResume::Yes) help += " (may change on --resume)";
    if (s.on_resume == OnResume::NotWithForecast)
      help += " (may change on --resume, except against a forecast)";
    if (s.kind == TrainOption::Bool) {
      app.add_flag(s.flag)->description(help);
      continue;
    }
    CLI::Option* opt = app.add_option(s.flag, a.text[s.flag], help);
    opt->type_name(s.kind == TrainOption::Int    ? "INT"
                   : s.kind == TrainOption::Real ? "NUMBER"
                                                 : "TEXT");
    const nlohmann::json d = s.get(defaults);
    opt->default_str(d.is_string() ? d.get<std::string>() : d.dump());
    if (s.kind == TrainOption::Int)
      opt->check(in_range<int64_t>(int64_t(s.lo), int64_t(s.hi)));
    else if (s.kind == TrainOption::Real)
      opt->check(in_range<double>(s.lo, s.hi, s.open_lo));
    else if (s.kind == TrainOption::Choice)
      opt->check(CLI::IsMember(s.choices));
  }
}

int run_train(const TrainCli& a) {
  std::unique_ptr<Trainer> t;
  if (!a.resume.empty()) {
    refuse_unresumable(a);
    ResumeChanges changes;
    changes.edit = [&a](TrainOptions& o) { apply(a, o, /*only_given=*/true); };
    for (const TrainOption& s : train_option_table())
      if (s.flag && a.given(s.flag)) changes.given.push_back(s.flag);
    t = Trainer::resume(a.resume, nullptr, changes);
  } else if (!a.fork_from.empty()) {
    if (a.out.empty()) fail("--fork-from needs --out for the new run directory");
    TrainOptions o = read_run_state(a.fork_from).options;
    apply(a, o, /*only_given=*/true);
    t = Trainer::fork(a.fork_from, a.out, o);
  } else {
    if (a.out.empty()) fail("give --out RUN_DIR for a new run (or --resume RUN_DIR)");
    if (a.d.rows.empty() && a.d.data.empty())
      fail(
          "give training data: --rows FILE (pre-tokenized rows) or --data MIXTURE --token-dir "
          "DIR");
    TrainOptions o;
    const bool model_given = a.given("--preset") || a.given("--config") || a.given("--set");
    if (!a.init.empty() && !model_given) {
      // The model is the checkpoint's own (config.json); only the run's options come from flags.
      apply(a, o, /*only_given=*/true);
      o.model = load_config(a.init);
      o.preset = "";
    } else {
      apply(a, o, /*only_given=*/false);
    }
    t = std::make_unique<Trainer>(o, a.out, a.init);
  }
  scaling::attach_forecast(*t);
  report::attach_report(*t);
  const int64_t first_step = t->step();
  const Timer wall;
  const TrainResult r = t->run();
  if (!t->is_root()) return 0;
  // For people: what was done and where it is. For scripts: one JSON line (absent means absent).
  const double secs = wall.seconds();
  const TrainOptions& o = t->options();
  const double tokens = double(r.steps_done - first_step) * o.batch * double(o.model.seq_len);
  fmt::print(stderr, "trained steps {}–{} of {} in {:.1f} s ({:.0f} tokens/s): loss {:.4f}{}\n",
             first_step, r.steps_done, o.steps, secs, secs > 0 ? tokens / secs : 0.0, r.last_loss,
             r.last_valid_ce >= 0 ? fmt::format(", validation CE {:.4f}", r.last_valid_ce) : "");
  if (!r.last_checkpoint.empty()) fmt::print(stderr, "checkpoint: {}\n", r.last_checkpoint);
  nlohmann::json line = {{"steps", r.steps_done}, {"loss", r.last_loss}};
  if (r.last_valid_ce >= 0) line["valid_ce"] = r.last_valid_ce;
  if (!r.last_checkpoint.empty()) line["checkpoint"] = r.last_checkpoint;
  fmt::print("{}\n", line.dump());
  return 0;
}

}  // namespace

MARIN_COMMAND(
    train, "train", "Train a model (new run, --resume RUN, or --fork-from CKPT)",
    [](CLI::App& app) -> Runner {
      auto a = std::make_shared<TrainCli>();
      a->app = &app;
      a->model.add(app);
      a->d.add(app);
      app.add_option("--out", a->out, "run directory");
      auto* overwrite =
          app.add_flag("--overwrite", a->overwrite,
                       "if --out already holds a run, move it aside (to OUT.old-N) and start anew");
      auto* init = app.add_option(
          "--init", a->init, "start from this model checkpoint (its config.json is the model)");
      auto* resume = app.add_option("--resume", a->resume, "continue the run in this directory")
                         ->excludes(init)
                         ->excludes(overwrite);
      app.add_option("--fork-from", a->fork_from,
                     "start a new run (--out) from this checkpoint with the options given")
          ->excludes(resume);
      add_table_options(app, *a);
      app.add_option("--inject-nan-grad", a->inject_nan,
                     "testing aid: poison the gradient at these steps (0-based indices: index i is "
                     "step i + 1 of the log)")
          ->group("");
      app.add_option("--inject-nan-param", a->inject_nan_param,
                     "testing aid: a NaN in the updated parameters at these steps (0-based "
                     "indices: index i is step i + 1 of the log)")
          ->group("");
      app.add_option("--inject-inf-state", a->inject_inf_state,
                     "testing aid: an Inf in the updated optimizer state at these steps (0-based "
                     "indices: index i is step i + 1 of the log)")
          ->group("");
      return [a] { return run_train(*a); };
    });

}  // namespace marin::cli
