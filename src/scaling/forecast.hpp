#pragma once
// The pre-registered forecast (recipe.md §9) and its scoring against the target run.
//
// make_forecast(): for each fraction g = 5%, 10%, …, 100% of training, the rungs' losses at g are
// fitted against their compute at g (C = training compute without the LM head up to g), and the
// law predicts the target at its own compute at g. The chinchilla law is fitted once, on the
// end-of-run points of every rung × budget, and predicts the target at 100% only. forecast.json
// holds the inputs, every fit, the predictions, the creation time and the xxh64 of ladder.json:
// written before the target starts.
//
// ForecastTracker: fed the target's evaluated losses, it reports predicted vs actual at every
// forecast fraction and the final beat/miss, also on the clean-only (decontaminated) macro loss.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/hash.hpp"
#include "model/config.hpp"
#include "scaling/downstream.hpp"
#include "scaling/fit.hpp"
#include "scaling/forecast_types.hpp"
#include "train/train_options.hpp"

namespace marin::scaling {

struct ForecastOptions {
  std::string ladder_dir;   // holds ladder.json
  std::string target_name;  // a preset name or a config file, recorded as given
  ModelConfig target;
  int64_t target_steps = 0;  // 0: the ladder's budget (tokens per parameter), as a rung's
  int64_t target_batch = 0;  // 0: the ladder's batch rule at the target's width; else an override
  // The target's budget (tokens per active parameter; 0: the ladder's first). It sets the steps
  // (unless target_steps) and, on a ladder of several budgets, which rungs a law in C fits.
  double target_tokens_per_param = 0;
  LawSpec law;  // family and L∞ (E for chinchilla; the sigmoid's ceiling is ln V of the target)
  // Also fit every other law family and choose the one of smallest forward-holdout RMSE (unless
  // law_given: then the comparison is recorded and `law` is kept).
  bool compare = false, law_given = false;
  double interval_level = 0.9;
  int interval_replicates = 400;
  // Downstream metrics forecast from the loss (downstream.hpp): forecast.json "downstream".
  std::vector<DownstreamSpec> downstream;
};

// The JSON pointers of TrainOptions::to_json() that a forecast binds: its target must train with
// exactly these values (`train --forecast` refuses a run that differs, naming the field). The
// rest (evaluation and checkpoint periods, micro-batch, threads, time limit) do not change what
// is predicted.
const std::vector<std::string>& bound_option_keys();
// The differences between a forecast's target ("inputs"."target") and a run's options, one line
// per field ("optimizer.muonh_lr: forecast 0.01, run 0.02"); empty when the run is the target.
// The tokenizer is compared by the hash of its vocabulary, not by path.
std::vector<std::string> target_differences(const ForecastTarget& target, const TrainOptions& o);
// The canaries of a forecast scored against their rungs in the ladder (forecast "ladder"."dir",
// or `ladder_dir` when given): per canary {name, predicted, actual, diff_nats, diff_percent,
// verdict, per fraction}. marin::Error naming the canary when its rung is not done.
nlohmann::json score_canaries(const Forecast& forecast, const std::string& ladder_dir = "");
// The same for a forecast as read from its file (Forecast::from_json).
nlohmann::json score_canaries(const nlohmann::json& forecast, const std::string& ladder_dir = "");

// The xxh64 of `bytes` as 16 lowercase hex digits (core/hash.hpp).
using marin::xxh64_hex;
// UTC now as 2025-01-31T12:34:56Z.
std::string utc_now();

// Builds the forecast from DIR/ladder.json (every rung must be done). Fractions where the fit
// fails (e.g. L∞ not below every loss) carry an error instead of a prediction.
Forecast build_forecast(const ForecastOptions& o);
// build_forecast(o).to_json(): forecast.json as written.
nlohmann::json make_forecast(const ForecastOptions& o);

class ForecastTracker {
 public:
  // Reads forecast.json; `total_steps` is the tracked run's step count and must equal the
  // forecast's target steps (a forecast is for one budget). marin::Error otherwise.
  ForecastTracker(const std::string& forecast_path, int64_t total_steps);
  // The forecast as read from its file: marin::Error unless its format is marin-forecast-v1.
  static ForecastTracker from_json(const nlohmann::json& forecast, int64_t total_steps);
  ForecastTracker(Forecast forecast, int64_t total_steps);

  // `step` = completed steps when `loss` was measured (the trainer's valid_ce point). At a
  // forecast fraction (step == round(g·total_steps)) returns {step, fraction, predicted, actual,
  // diff_nats (actual − predicted), diff_percent (of predicted), beat}; otherwise nullopt.
  // With `clean_loss` and a clean-only forecast at that step, the record gains "clean".
  std::optional<nlohmann::json> observe(int64_t step, double loss,
                                        std::optional<double> clean_loss = std::nullopt) const;
  // The final comparison at g = 100%: {metric, predicted, actual, diff_nats, diff_percent,
  // verdict: "beat" | "miss" | "exact", ...}; with `clean_loss` (the clean-only macro loss of
  // the contamination audit) the same comparison under "clean".
  nlohmann::json final_report(double loss, std::optional<double> clean_loss) const;

  // The steps at which a prediction exists (the run should evaluate there).
  std::vector<int64_t> steps() const;
  double predicted_final() const;
  // The ladder's metric ("valid_ce" or "macro_loss") and, for "macro_loss", its definition
  // (eval::MacroMetric JSON; null when the forecast has none).
  const std::string& metric() const { return forecast_.prediction.metric; }
  nlohmann::json eval_spec() const { return forecast_.eval.value_or(nlohmann::json()); }
  // The forecast as read (inputs, canaries).
  const Forecast& forecast() const { return forecast_; }

 private:
  Forecast forecast_;
  int64_t total_steps_ = 0;
  std::map<int64_t, std::pair<double, double>> by_step_;  // step → (fraction, predicted)
  std::map<int64_t, double> clean_by_step_;               // step → predicted clean-only loss
  std::optional<double> final_, final_clean_;
};

}  // namespace marin::scaling
