// marin forecast: fits a law (L = L∞ + A·C^(−α), or a sigmoid in ln C) across the rungs of a
// finished ladder at every 5% of training, or chinchilla's E + A/N^α + B/D^β over the ends of the
// runs of a ladder of several budgets, and predicts a target run (recipe.md §9,
// docs/scaling.md), with a prediction interval, forward holdouts and the canaries' forecasts.
// Writes forecast.json, the pre-registration (binding the target's options), and optionally a PNG.
#include <fmt/core.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "model/accounting.hpp"
#include "scaling/forecast.hpp"
#include "scaling/ladder.hpp"

namespace marin::cli {
namespace {
namespace fs = std::filesystem;

struct ForecastCli {
  ModelOptions model;
  std::string ladder, target, out = "forecast.json", plot, law = "power", score_canaries;
  int64_t steps = 0, batch = 0;
  double l_inf = 1.5, tokens_per_param = 0;
  bool fit_l_inf = false, force = false, compare = false;
  std::vector<std::string> metrics;  // --metric TASK/METRIC: downstream metrics from the loss
  double metric_floor = 0, metric_ceiling = 1;
  CLI::App* app = nullptr;
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A word of a printed command: as it is when the shell reads it so, else quoted.
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
                                       "QRSTUVWXYZ0123456789_-./=,:+@%") == std::string::npos;
  return plain ? s : shell_quote(s);
}

// The command that trains the target as the forecast binds it: the model as --preset/--config
// with --set for what differs, the bound options, the ladder's data and --forecast. A mixture is
// embedded in a ladder's options, not named by a file, so it is written beside the forecast
// (FORECAST.mixture.json) for --data.
std::string target_command(const ForecastCli& a, const scaling::ForecastOptions& o,
                           const scaling::Forecast& f) {
  const scaling::ForecastTarget& tg = f.inputs.target;
  const std::vector<std::string> presets = ModelConfig::preset_names();
  const bool preset = std::find(presets.begin(), presets.end(), o.target_name) != presets.end();
  const ModelConfig base =
      preset ? ModelConfig::preset(o.target_name) : ModelConfig::from_toml_file(o.target_name);
  std::string cmd =
      fmt::format("marin train {} {}", preset ? "--preset" : "--config", shell_word(o.target_name));
  for (const std::string& kv : o.target.overrides_from(base)) cmd += " --set " + shell_word(kv);
  cmd += " " + tg.train_flags;
  if (tg.options) {
    const nlohmann::json& opt = *tg.options;
    const nlohmann::json &data = opt.at("data"), &valid = opt.at("valid");
    if (data.value("kind", "") == "rows") {
      cmd += " --rows " + shell_word(data.at("path").get<std::string>());
    } else if (data.value("kind", "") == "mixture") {
      const std::string mixture = a.out + ".mixture.json";
      write_file_atomic(mixture, data.at("mixture").dump(2) + "\n");
      cmd += " --data " + shell_word(mixture) + " --token-dir " +
             shell_word(data.at("tokens").get<std::string>());
    }
    if (valid.value("kind", "") == "rows")
      cmd += " --valid-rows " + shell_word(valid.at("path").get<std::string>());
    // The tokenizer the target is bound to (inputs.target.tokenizer_xxh64) is the ladder's.
    const nlohmann::json ladder = load_json(o.ladder_dir + "/ladder.json").at("ladder");
    if (ladder.value("tokenizer", nlohmann::json()).is_string())
      cmd += " --tokenizer " + shell_word(ladder.at("tokenizer").get<std::string>());
  }
  return cmd + " --forecast " + shell_word(a.out) + " --out runs/" +
         shell_word(fs::path(o.target_name).stem().string());
}

// marin forecast --score-canaries FORECAST: the canaries' registered forecasts against their
// rungs, once trained (train --forecast does the same before the target's first step).
int run_score_canaries(const ForecastCli& a) {
  const scaling::Forecast f = scaling::Forecast::from_json(load_json(a.score_canaries));
  if (f.canaries.empty()) fail("{}: the forecast registers no canary", a.score_canaries);
  const nlohmann::json s = scaling::score_canaries(f, a.ladder);
  for (auto& c : s)
    fmt::print("canary {}: predicted {:.4f}, actual {:.4f}: {} by {:+.4f} nats ({:+.2f}%)\n",
               c["name"].get<std::string>(), c["predicted"].get<double>(),
               c["actual"].get<double>(), c["verdict"].get<std::string>(),
               c["diff_nats"].get<double>(), c["diff_percent"].get<double>());
  fmt::print("{}\n", nlohmann::json({{"canaries", s}}).dump());
  return 0;
}

// The target and the law from the command line.
scaling::ForecastOptions forecast_options(const ForecastCli& a) {
  if (a.ladder.empty()) fail("give --ladder DIR (the ladder's directory, with ladder.json)");
  // The target: --target NAME|FILE, or --preset/--config, plus --set overrides.
  std::string preset = a.model.preset, config = a.model.config;
  if (!a.target.empty()) {
    if (!preset.empty() || !config.empty())
      fail("give the target once: --target, --preset or --config");
    (fs::exists(a.target) ? config : preset) = a.target;
  }
  if (preset.empty() && config.empty())
    fail("give the target: --target, --preset NAME or --config FILE");
  scaling::ForecastOptions o;
  o.ladder_dir = a.ladder;
  o.target = resolve_config(preset, config, a.model.sets);
  o.target_name = preset.empty() ? config : preset;
  // The batch is the ladder's rule at the target's width; --target-batch overrides it (recorded).
  o.target_batch = a.batch;
  o.target_steps = a.steps;                        // 0: the ladder's budget
  o.target_tokens_per_param = a.tokens_per_param;  // 0: the ladder's first budget
  o.law.family = scaling::parse_law(a.law);
  o.law.l_inf = a.fit_l_inf ? std::nullopt : std::optional<double>(a.l_inf);
  o.compare = a.compare;
  o.law_given = a.app->count("--law") > 0;
  for (const std::string& m : a.metrics) {
    scaling::DownstreamSpec d = scaling::parse_downstream_metric(m);
    d.floor = a.metric_floor;
    d.ceiling = a.metric_ceiling;
    o.downstream.push_back(d);
  }
  return o;
}

// The target, how to train it, and the law.
void print_inputs(const scaling::ForecastOptions& o, const scaling::Forecast& f) {
  const scaling::ForecastTarget& tg = f.inputs.target;
  fmt::print("forecast for {} ({} steps × batch {} [{}], C = {:.4e} FLOPs without the LM head)\n",
             o.target_name, tg.steps, tg.batch, tg.batch_source, tg.compute);
  // The same warning as a rung's (ladder.cpp): a multiple that rounds the target off its rule.
  if (tg.rule_batch && o.target_batch == 0 &&
      tg.batch != std::max<int64_t>(1, std::llround(*tg.rule_batch)))
    fmt::print(stderr,
               "marin: warning: target {}: batch {} is off the batch rule's {:.3g} (rounded to the "
               "ladder's multiple)\n",
               o.target_name, tg.batch, *tg.rule_batch);
  fmt::print("the target must train with: {} (and the ladder's data and tokenizer)\n",
             tg.train_flags);
  const scaling::ForecastLaw& law = f.inputs.law;
  fmt::print("ladder {} (xxh64 {}), metric {}, law {} ({}), L∞ {}\n", f.ladder.file, f.ladder.xxh64,
             f.ladder.metric, scaling::law_name(law.spec.family), law.chosen_by,
             o.law.l_inf ? fmt::format("fixed at {}", *o.law.l_inf) : std::string("fitted"));
  if (law.comparison.is_object()) {
    fmt::print(
        "forward-holdout error by law (every rung but the smallest two, from the smaller):\n");
    for (auto& [name, c] : law.comparison.items())
      fmt::print("  {:<8} rmse {} over {} predictions\n", name,
                 c["rmse"].is_number() ? fmt::format("{:.4f}", c["rmse"].get<double>())
                                       : std::string("- (no fit)"),
                 c["n"].get<int64_t>());
  }
}

// One row per fraction: the fit, the prediction, its interval and the forward holdouts.
void print_fits(const scaling::Forecast& f) {
  fmt::print("{:>5} {:>11} {:>8} {:>8} {:>8} {:>9} {:>10} {:>19}  {}\n", "g", "A", "alpha", "L_inf",
             "R2", "LOO rmse", "predicted", "interval",
             "forward holdouts (predicted − actual, from the smaller rungs)");
  std::string last_error;
  for (const scaling::FractionFit& e : f.fits) {
    const double g = e.fraction;
    const nlohmann::json& fit = e.all.fit;
    if (fit.is_null()) {
      // The same reason at every fraction (the chinchilla law's intermediate ones) once.
      const std::string why = e.all.error.value_or("fit failed");
      if (why != last_error) fmt::print("{:>4.0f}% {}\n", 100 * g, why);
      last_error = why;
      continue;
    }
    last_error.clear();
    if (fit.value("law", "") == "chinchilla")
      fmt::print(
          "{:>4.0f}% chinchilla: E {:.4f}{}, A {:.4e}, alpha {:.4f}, B {:.4e}, beta {:.4f}, "
          "over {} rungs x budgets\n",
          100 * g, fit["E"].get<double>(), fit["l_inf_fitted"].get<bool>() ? "" : " (fixed)",
          fit["A"].get<double>(), fit["alpha"].get<double>(), fit["B"].get<double>(),
          fit["beta"].get<double>(), fit["n"].get<int64_t>());
    const nlohmann::json iv = e.all.interval.value_or(nlohmann::json());
    std::string fwd;
    for (auto& h : e.all.forward.value_or(nlohmann::json::array()))
      fwd += h.contains("diff_nats") ? fmt::format(" {} {:+.4f}", h["rung"].get<std::string>(),
                                                   h["diff_nats"].get<double>())
                                     : fmt::format(" {} -", h["rung"].get<std::string>());
    fmt::print("{:>4.0f}% {:>11.4e} {:>8.4f} {:>8.4f} {:>8.4f} {:>9} {:>10.4f} {:>19} {}\n",
               100 * g, fit["A"].get<double>(), fit["alpha"].get<double>(),
               fit["l_inf"].get<double>(), fit["r2"].get<double>(),
               fit["loo"].is_null() ? std::string("-")
                                    : fmt::format("{:.4f}", fit["loo"]["rmse"].get<double>()),
               e.all.predicted.value(),
               iv.is_object()
                   ? fmt::format("[{:.4f}, {:.4f}]", iv["lo"].get<double>(), iv["hi"].get<double>())
                   : std::string("-"),
               fwd);
  }
}

// The forward holdouts per rung, the intervals at 100% and the canaries to train next.
void print_summary(const scaling::Forecast& f) {
  for (auto& r : f.forward_holdouts["rungs"])
    fmt::print(
        "forward holdout {}: rmse {:.4f} nats, mean error {:+.4f}, beat its forecast at {} of "
        "{} fractions\n",
        r["rung"].get<std::string>(), r["rmse"].get<double>(), r["mean_diff_nats"].get<double>(),
        r["rung_beat_forecast"].get<int64_t>(), r["n"].get<int64_t>());
  if (const auto& iv = f.prediction.interval; iv.is_object())
    fmt::print("{:.0f}% prediction interval at 100%: [{:.4f}, {:.4f}] ({} noise, {})\n",
               100 * iv["level"].get<double>(), iv["lo"].get<double>(), iv["hi"].get<double>(),
               iv["noise_source"].get<std::string>(), "parametric bootstrap over the rungs");
  if (const auto iv = f.prediction.clean_interval.value_or(nlohmann::json()); iv.is_object())
    fmt::print(
        "{:.0f}% prediction interval at 100%, clean-only documents: [{:.4f}, {:.4f}] ({:.4f} "
        "predicted; {} noise)\n",
        100 * iv["level"].get<double>(), iv["lo"].get<double>(), iv["hi"].get<double>(),
        f.prediction.clean_final_loss.value_or(0.0), iv["noise_source"].get<std::string>());
  for (const scaling::CanaryForecast& c : f.canaries)
    if (!c.predictions.empty())
      fmt::print("canary {}: predicted {:.4f} at 100% (train it next: marin ladder --canaries)\n",
                 c.name, c.predictions.back().predicted_loss);
}

// Each downstream metric's link, holdout and prediction at 100% (downstream_forecast's record).
void print_downstream(const scaling::Forecast& f) {
  const nlohmann::json downstream = f.downstream.value_or(nlohmann::json::object());
  for (auto& [name, d] : downstream.items()) {
    const auto& l = d["link"];
    fmt::print(
        "downstream {} from {}: {:.3g} + {:.3g}·σ(−{:.4f}·(L − {:.4f})), {} points, rmse {:.4f}, "
        "R2 {}\n",
        name, d["against"].get<std::string>(), l["floor"].get<double>(),
        l["ceiling"].get<double>() - l["floor"].get<double>(), l["k"].get<double>(),
        l["L0"].get<double>(), l["n"].get<int64_t>(), l["rmse"].get<double>(),
        l["r2"].is_number() ? fmt::format("{:.4f}", l["r2"].get<double>()) : std::string("-"));
    if (d.contains("holdout") && d["holdout"].value("rmse", nlohmann::json()).is_number())
      fmt::print("  holdout {} (link fitted without it): rmse {:.4f}, mean error {:+.4f}\n",
                 d["holdout"]["rung"].get<std::string>(), d["holdout"]["rmse"].get<double>(),
                 d["holdout"]["mean_diff"].get<double>());
    if (d.contains("final")) {
      const auto& fin = d["final"];
      fmt::print("  target at 100%: loss {:.4f} → {} {:.4f}{}\n", fin["loss"].get<double>(), name,
                 fin["predicted"].get<double>(),
                 fin.contains("interval") && fin["interval"].contains("lo")
                     ? fmt::format(" [{:.4f}, {:.4f}] ({:.0f}% interval, {})",
                                   fin["interval"]["lo"].get<double>(),
                                   fin["interval"]["hi"].get<double>(),
                                   100 * fin["interval"]["level"].get<double>(),
                                   fin["interval"]["method"].get<std::string>())
                     : std::string());
    }
  }
}

// --plot: scripts/plot_forecast.py on the written file (a warning, not an error, without it).
void plot_forecast(const ForecastCli& a) {
  const std::string script = std::string(MARIN_SOURCE_DIR) + "/scripts/plot_forecast.py";
  if (!fs::exists("/usr/bin/python3") || !fs::exists(script)) {
    fmt::print(stderr, "marin: warning: no plot ({} missing)\n",
               fs::exists("/usr/bin/python3") ? script : std::string("/usr/bin/python3"));
    return;
  }
  const std::string cmd = "/usr/bin/python3 " + shell_quote(script) + " " + shell_quote(a.out) +
                          " " + shell_quote(a.plot);
  const int rc = std::system(cmd.c_str());
  if (rc != 0)
    fmt::print(stderr, "marin: warning: the plot failed (exit {}; is matplotlib installed?)\n",
               WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
  else
    fmt::print("wrote {}\n", a.plot);
}

int run_forecast(const ForecastCli& a) {
  if (!a.score_canaries.empty()) return run_score_canaries(a);
  const scaling::ForecastOptions o = forecast_options(a);
  if (fs::exists(a.out) && !a.force)
    fail("{} exists: a forecast is a pre-registration and is not overwritten (--force to replace)",
         a.out);
  const scaling::Forecast f = scaling::build_forecast(o);
  write_file_atomic(a.out, f.to_json().dump(2) + "\n");
  print_inputs(o, f);
  print_fits(f);
  print_summary(f);
  print_downstream(f);
  fmt::print("wrote {}\ntrain the target:\n  {}\n", a.out, target_command(a, o, f));
  if (!a.plot.empty()) plot_forecast(a);
  return 0;
}

}  // namespace

MARIN_COMMAND(
    forecast, "forecast",
    "Fit the ladder's loss vs compute at every 5% and pre-register a target's loss",
    [](CLI::App& app) -> Runner {
      auto a = std::make_shared<ForecastCli>();
      a->app = &app;
      app.add_option("--ladder", a->ladder, "ladder directory (holds ladder.json)");
      app.add_option("--target", a->target, "target: a preset name or a config TOML");
      a->model.add(app);
      app.add_option("--target-steps", a->steps,
                     "target steps (default: the ladder's tokens-per-param budget)");
      app.add_option("--target-batch", a->batch,
                     "override the ladder's batch rule for the target (recorded as an override)");
      app.add_option("--law", a->law,
                     "power (L∞ + A·C^−α), sigmoid (in ln C, ceiling ln V) or chinchilla "
                     "(E + A/N^α + B/D^β over the end-of-run points; needs rungs at ≥ 2 budgets)")
          ->check(CLI::IsMember({"power", "sigmoid", "chinchilla"}));
      app.add_option("--target-tokens-per-param", a->tokens_per_param,
                     "the target's budget (default: the ladder's first); on a ladder of several "
                     "budgets the laws in C fit the rungs at it");
      app.add_flag("--compare", a->compare,
                   "fit every law, print their forward-holdout errors, and choose the smallest "
                   "(unless --law is given)");
      auto* li = app.add_option("--l-inf", a->l_inf, "fixed irreducible loss L∞ (chinchilla: E)")
                     ->default_val(1.5);
      app.add_flag("--fit-l-inf", a->fit_l_inf, "fit L∞ (variable projection)")->excludes(li);
      app.add_option("--out", a->out, "forecast file")->default_val("forecast.json");
      app.add_option("--plot", a->plot, "also write this PNG (scripts/plot_forecast.py)");
      app.add_flag("--force", a->force, "overwrite an existing forecast file");
      app.add_option("--metric", a->metrics,
                     "also forecast a downstream metric from the loss: TASK/METRIC or "
                     "TASK/clean/METRIC, comma-separated (a ladder with [tasks]; a logistic in "
                     "the loss, docs/scaling.md)")
          ->delimiter(',');
      app.add_option("--metric-floor", a->metric_floor,
                     "the link's floor: the metric's chance level (e.g. 0.25 for 4 choices)")
          ->capture_default_str();
      app.add_option("--metric-ceiling", a->metric_ceiling, "the link's ceiling")
          ->capture_default_str();
      app.add_option("--score-canaries", a->score_canaries,
                     "score this forecast's canaries against their trained rungs (--ladder: "
                     "default the forecast's)");
      return [a] { return run_forecast(*a); };
    });

}  // namespace marin::cli
