// marin forecast: fits L = L∞ + A·C^(−α) across the rungs of a finished ladder at every 5% of
// training and predicts a target run (recipe.md §9, docs/scaling.md). Writes forecast.json, the
// pre-registration, and optionally a PNG plot.
#include <fmt/core.h>
#include <sys/wait.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "model/accounting.hpp"
#include "scaling/forecast.hpp"
#include "scaling/ladder.hpp"

namespace marin::cli {
namespace {
namespace fs = std::filesystem;

struct ForecastCli {
  ModelOptions model;
  std::string ladder, target, out = "forecast.json", plot;
  int64_t steps = 0, batch = 0;
  double l_inf = 1.5;
  bool fit_l_inf = false, force = false;
  CLI::App* app = nullptr;
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

int run_forecast(const ForecastCli& a) {
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
  o.target_batch = a.batch > 0 ? a.batch : (preset.empty() ? 0 : preset_run(preset).batch);
  if (o.target_batch <= 0) fail("give --target-batch (sequences per step of the target run)");
  if (a.steps > 0) {
    o.target_steps = a.steps;
  } else {
    // The ladder's budget (tokens per active parameter), rounded like a rung's.
    const nlohmann::json lj = scaling::read_ladder_json(a.ladder);
    const double tpp = lj.at("ladder").at("tokens_per_param").get<double>();
    const int64_t k = scaling::kFractions;
    o.target_steps = (steps_for_budget(o.target, o.target_batch, tpp) + k - 1) / k * k;
    fmt::print(stderr, "forecast: target steps {} from the ladder's budget of {} tokens/param\n",
               o.target_steps, tpp);
  }
  if (a.fit_l_inf)
    o.l_inf = std::nullopt;
  else
    o.l_inf = a.l_inf;
  if (fs::exists(a.out) && !a.force)
    fail("{} exists: a forecast is a pre-registration and is not overwritten (--force to replace)",
         a.out);

  const nlohmann::json f = scaling::make_forecast(o);
  write_file_atomic(a.out, f.dump(2) + "\n");

  fmt::print("forecast for {} ({} steps × batch {}, C = {:.4e} FLOPs without the LM head)\n",
             o.target_name, o.target_steps, o.target_batch,
             f["inputs"]["target"]["compute"].get<double>());
  fmt::print("ladder {} (xxh64 {}), metric {}, L∞ {}\n", f["ladder"]["file"].get<std::string>(),
             f["ladder"]["xxh64"].get<std::string>(), f["ladder"]["metric"].get<std::string>(),
             o.l_inf ? fmt::format("fixed at {}", *o.l_inf) : std::string("fitted"));
  fmt::print("{:>5} {:>11} {:>8} {:>8} {:>8} {:>9} {:>10}\n", "g", "A", "alpha", "L_inf", "R2",
             "LOO rmse", "predicted");
  for (auto& e : f["fits"]) {
    const double g = e["fraction"].get<double>();
    if (e["fit"].is_null()) {
      fmt::print("{:>4.0f}% {}\n", 100 * g, e.value("error", "fit failed"));
      continue;
    }
    const auto& fit = e["fit"];
    fmt::print("{:>4.0f}% {:>11.4e} {:>8.4f} {:>8.4f} {:>8.4f} {:>9} {:>10.4f}\n", 100 * g,
               fit["A"].get<double>(), fit["alpha"].get<double>(), fit["l_inf"].get<double>(),
               fit["r2"].get<double>(),
               fit["loo"].is_null() ? std::string("-")
                                    : fmt::format("{:.4f}", fit["loo"]["rmse"].get<double>()),
               e["predicted_loss"].get<double>());
  }
  fmt::print("wrote {}\n", a.out);

  if (!a.plot.empty()) {
    const std::string script = std::string(MARIN_SOURCE_DIR) + "/scripts/plot_forecast.py";
    if (!fs::exists("/usr/bin/python3") || !fs::exists(script)) {
      fmt::print(stderr, "marin: warning: no plot ({} missing)\n",
                 fs::exists("/usr/bin/python3") ? script : std::string("/usr/bin/python3"));
      return 0;
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
  return 0;
}

}  // namespace

MARIN_COMMAND(
    forecast, "forecast",
    "Fit the ladder's loss vs compute at every 5% and pre-register a target's loss",
    [](CLI::App& app) -> Runner {
      auto a = std::make_shared<ForecastCli>();
      a->app = &app;
      app.add_option("--ladder", a->ladder, "ladder directory (holds ladder.json)")->required();
      app.add_option("--target", a->target, "target: a preset name or a config TOML");
      a->model.add(app);
      app.add_option("--target-steps", a->steps,
                     "target steps (default: the ladder's tokens-per-param budget)");
      app.add_option("--target-batch", a->batch,
                     "target sequences per step (default: the preset's)");
      auto* li = app.add_option("--l-inf", a->l_inf, "fixed irreducible loss L∞")->default_val(1.5);
      app.add_flag("--fit-l-inf", a->fit_l_inf, "fit L∞ (variable projection)")->excludes(li);
      app.add_option("--out", a->out, "forecast file")->default_val("forecast.json");
      app.add_option("--plot", a->plot, "also write this PNG (scripts/plot_forecast.py)");
      app.add_flag("--force", a->force, "overwrite an existing forecast file");
      return [a] { return run_forecast(*a); };
    });

}  // namespace marin::cli
