// marin train: a new run, a resumed run (--resume RUN) or a fork of a checkpoint with changed
// settings (--fork-from CKPT). Prints a live progress line; writes RUN/metrics.jsonl.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "data/mixture.hpp"
#include "scaling/forecast_hook.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace marin::cli {
namespace {

struct TrainCli {
  ModelOptions model;
  DataOptions d;
  std::string forecast, out, init, resume, fork_from, optimizer = "muonh";
  std::string transport = "dropless", expert_radius = "layer";
  int batch = 8, micro_batch = 0;
  int64_t steps = 100, ckpt_every = 0, keep_every = 0, eval_every = 0, eval_batches = 4,
          eval_domains_every = 0;
  uint64_t seed = 0;
  double muonh_lr = 0, adam_lr = 0, adamw_wd = 0.1, time_limit = 0;
  bool gate_router_wd = false, no_qb = false, overwrite = false;
  int max_bad_steps = 3;
  int64_t waves = 3;
  int ep = 1;
  bool strict_data = false;
  std::vector<int64_t> inject_nan, inject_nan_param, inject_inf_state;
  CLI::App* app = nullptr;
  bool given(const char* flag) const { return app->count(flag) > 0; }
};

// Applies the options given on the command line to `o` (all of them for a new run; only the
// explicitly given ones for a fork, so everything else stays as the parent had it).
void apply(const TrainCli& a, TrainOptions& o, bool only_given) {
  auto want = [&](const char* flag) { return !only_given || a.given(flag); };
  if (want("--preset") || want("--config") || want("--set")) {
    if (!only_given || a.given("--set")) {
      ModelConfig c = only_given ? o.model : a.model.resolve();
      if (only_given)
        for (auto& kv : a.model.sets) {
          auto eq = kv.find('=');
          if (eq == std::string::npos) fail("--set expects key=value, got '{}'", kv);
          c.set(kv.substr(0, eq), kv.substr(eq + 1));
        }
      c.validate();
      o.model = c;
    }
    if (!only_given) o.preset = a.model.preset;
  }
  if (want("--tokens") && !a.d.tokens.empty()) o.data = {{"kind", "rows"}, {"path", a.d.tokens}};
  if (want("--data") && !a.d.data.empty()) {
    if (a.d.token_dir.empty()) fail("--data needs --token-dir (the output of `marin tokenize`)");
    // The mixture is embedded in the run's options, so the run does not depend on the file.
    const MixtureConfig mix = MixtureConfig::load(a.d.data);
    o.data = {{"kind", "mixture"}, {"tokens", a.d.token_dir}, {"mixture", mix.to_json()}};
    // In-distribution validation: the valid split of every domain the mixture trains on.
    nlohmann::json domains = nlohmann::json::array();
    for (auto& src : mix.sources) domains.push_back(src.domain);
    if (!only_given || !a.given("--valid-tokens"))
      o.valid = {{"kind", "valid"}, {"tokens", a.d.token_dir}, {"domains", domains}};
  }
  if (want("--tokenizer")) o.tokenizer = a.d.tokenizer;
  if (want("--forecast")) o.forecast = a.forecast;
  if (want("--valid-tokens") && (!a.d.valid_tokens.empty() || a.d.data.empty()))
    o.valid = a.d.valid_tokens.empty()
                  ? nlohmann::json()
                  : nlohmann::json{{"kind", "rows"}, {"path", a.d.valid_tokens}};
  if (want("--batch")) o.batch = a.batch;
  if (want("--micro-batch")) o.micro_batch = a.micro_batch;
  if (want("--steps")) o.steps = a.steps;
  if (want("--seed")) o.seed = a.seed;
  if (want("--optimizer")) o.optim.kind = a.optimizer;
  if (want("--muonh-lr")) o.optim.muonh_lr = a.muonh_lr;
  if (want("--adam-lr")) o.optim.adam_lr = a.adam_lr;
  if (want("--adamw-wd")) o.optim.adamw_wd = a.adamw_wd;
  if (want("--expert-radius")) o.optim.expert_radius = optim::parse_radius_scope(a.expert_radius);
  if (want("--gate-router-wd")) o.optim.gate_router_wd = a.gate_router_wd;
  if (want("--transport")) o.transport = parse_transport(a.transport);
  if (want("--waves")) o.waves = a.waves;
  if (want("--ep")) o.ep = a.ep;
  if (want("--strict-data")) o.strict_data = a.strict_data;
  if (want("--no-qb")) o.qb = !a.no_qb;
  if (want("--ckpt-every")) o.ckpt_every = a.ckpt_every;
  if (want("--keep-every")) o.keep_every = a.keep_every;
  if (want("--eval-every")) o.eval_every = a.eval_every;
  if (want("--eval-batches")) o.eval_batches = a.eval_batches;
  if (want("--eval-domains-every")) o.eval_domains_every = a.eval_domains_every;
  if (want("--max-bad-steps")) o.max_bad_steps = a.max_bad_steps;
  o.time_limit_s = a.time_limit;
  o.overwrite = a.overwrite;
  o.inject_nan_grad_steps = a.inject_nan;
  o.inject_nan_param_steps = a.inject_nan_param;
  o.inject_inf_state_steps = a.inject_inf_state;
}

// The options --resume applies: how the rest of the run is computed (transport, waves, expert
// split), how long it is and how often it checkpoints and evaluates. Every other option is the
// run's own (model, data, optimizer, seed, batch, micro-batch) and is refused by name: a flag is
// never silently dropped.
const std::vector<std::string> kResumableOptions = {
    "--time-limit", "--steps",      "--transport",    "--waves",         "--ep",     "--ckpt-every",
    "--keep-every", "--eval-every", "--eval-batches", "--max-bad-steps", "--threads"};
// Besides those: --resume itself, --help, and the testing aids (fault injection).
const std::vector<std::string> kAlwaysAccepted = {"--resume", "--help", "--inject-nan-grad",
                                                  "--inject-nan-param", "--inject-inf-state"};

void refuse_unresumable(const TrainCli& a) {
  auto listed = [](const std::vector<std::string>& names, const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  std::vector<std::string> refused;
  for (const CLI::Option* opt : a.app->get_options()) {
    if (opt->count() == 0 || opt->get_lnames().empty()) continue;
    const std::string name = "--" + opt->get_lnames().front();
    if (!listed(kResumableOptions, name) && !listed(kAlwaysAccepted, name)) refused.push_back(name);
  }
  if (!refused.empty())
    fail(
        "{} cannot change on --resume (the run keeps its own; --resume may change {}); use "
        "--fork-from CHECKPOINT --out NEW_RUN to start a new run with other options",
        fmt::join(refused, ", "), fmt::join(kResumableOptions, ", "));
}

int run_train(const TrainCli& a) {
  std::unique_ptr<Trainer> t;
  if (!a.resume.empty()) {
    refuse_unresumable(a);
    ResumeChanges changes;
    changes.time_limit_s = a.time_limit;
    changes.edit = [&a](TrainOptions& o) { apply(a, o, /*only_given=*/true); };
    t = Trainer::resume(a.resume, nullptr, changes);
  } else if (!a.fork_from.empty()) {
    if (a.out.empty()) fail("--fork-from needs --out for the new run directory");
    TrainOptions o = read_run_state(a.fork_from).options;
    apply(a, o, /*only_given=*/true);
    t = Trainer::fork(a.fork_from, a.out, o);
  } else {
    if (a.out.empty()) fail("give --out RUN_DIR for a new run (or --resume RUN_DIR)");
    if (a.d.tokens.empty() && a.d.data.empty())
      fail(
          "give training data: --tokens FILE (pre-tokenized rows) or --data MIXTURE --token-dir "
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
      app.add_option("--forecast", a->forecast,
                     "forecast.json (marin forecast): log predicted vs actual loss");
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
      app.add_option("--batch", a->batch, "sequences per step (global: over all MPI ranks)")
          ->default_val(8)
          ->check(batch_range());
      app.add_option("--micro-batch", a->micro_batch,
                     "rows per forward; the step's micro-batches are shared by the MPI ranks and "
                     "their gradients summed exactly (default: batch/4, or batch/2, or batch)")
          ->check(in_range<int>(0, kMaxBatch));
      app.add_option("--steps", a->steps, "total steps (schedule horizon)")
          ->default_val(100)
          ->check(steps_range());
      app.add_option("--seed", a->seed, "initialisation seed")->default_val(0)->check(seed_range());
      app.add_option("--optimizer", a->optimizer, "muonh (recipe) or adamw (baseline)")
          ->check(CLI::IsMember({"muonh", "adamw"}));
      app.add_option("--muonh-lr", a->muonh_lr, "peak MuonH/AdamH rate (default: §5 rule)")
          ->check(rate_range());
      app.add_option("--adam-lr", a->adam_lr, "peak Adam rate (default: §5 rule)")
          ->check(rate_range());
      app.add_option("--adamw-wd", a->adamw_wd, "weight decay of the adamw baseline")
          ->check(rate_range());
      app.add_option("--expert-radius", a->expert_radius, "layer (default) or expert")
          ->check(CLI::IsMember({"layer", "expert"}));
      app.add_flag("--gate-router-wd", a->gate_router_wd,
                   "decay head gate and router weights by 0.02·(1 − t/T)");
      app.add_option("--transport", a->transport,
                     "dropless, capacity (recipe §8) or pooled (the hero's pooled waves); may "
                     "change on --resume")
          ->check(CLI::IsMember({"dropless", "capacity", "pooled"}));
      app.add_option("--waves", a->waves, "waves of the pooled transport (may change on --resume)")
          ->check(CLI::Range(int64_t(1), int64_t(64)));
      app.add_option("--ep", a->ep,
                     "expert parallelism: split the routed experts over groups of P ranks "
                     "(P divides the rank count and num_experts; may change on --resume)")
          ->check(CLI::Range(1, 1 << 20));
      app.add_flag("--strict-data", a->strict_data,
                   "refuse a run that would read its rows more than once (default: a warning)");
      app.add_flag("--no-qb", a->no_qb, "disable QB router balancing");
      app.add_option("--ckpt-every", a->ckpt_every, "rolling checkpoint every N steps")
          ->check(period_range());
      app.add_option("--keep-every", a->keep_every, "permanent checkpoint every N steps")
          ->check(period_range());
      app.add_option("--eval-every", a->eval_every, "validate every N steps")
          ->check(period_range());
      app.add_option("--eval-domains-every", a->eval_domains_every,
                     "per-domain macro loss/BPB (as marin eval) every N steps and at the end")
          ->check(period_range());
      app.add_option("--eval-batches", a->eval_batches, "validation batches")
          ->default_val(4)
          ->check(in_range<int64_t>(1, int64_t(1) << 30));
      app.add_option("--max-bad-steps", a->max_bad_steps,
                     "consecutive non-finite steps before stopping")
          ->default_val(3)
          ->check(in_range<int>(1, 1 << 20));
      app.add_option("--time-limit", a->time_limit,
                     "stop with a checkpoint after this many seconds (0: none)")
          ->check(in_range<double>(0, 1e9));
      app.add_option("--inject-nan-grad", a->inject_nan,
                     "testing aid: poison the gradient at these steps")
          ->group("");
      app.add_option("--inject-nan-param", a->inject_nan_param,
                     "testing aid: a NaN in the updated parameters at these steps")
          ->group("");
      app.add_option("--inject-inf-state", a->inject_inf_state,
                     "testing aid: an Inf in the updated optimizer state at these steps")
          ->group("");
      return [a] { return run_train(*a); };
    });

}  // namespace marin::cli
