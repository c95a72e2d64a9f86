#pragma once
// forecast.json as a type (recipe.md §9): what make_forecast writes and every consumer reads
// (the tracker, the canaries' scoring, the downstream forecasts, `marin forecast`'s table, the
// report's band). Its JSON is written and read in one place, forecast_json.cpp, so that a key is
// spelled once and a typo is a compile error, not a missing field at run time.
//
// Round trip: Forecast::from_json(f.to_json()) == f, and to_json(from_json(j)) dumps the same
// bytes as j for a forecast make_forecast wrote. The reader is lenient as the tracker always
// was: an absent field takes its default (hand-made forecasts in tests; a forecast from before
// the target's binding has no "options"), and a field of the wrong type is a marin::Error.
// Parts that are themselves records of another type (a fit's parameters, an interval, the
// inputs' points, a forward holdout, the law comparison, the target's model and options, the
// metric's definition, the downstream forecasts) are kept as their JSON.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "scaling/fit.hpp"

namespace marin::scaling {

// "ladder": the ladder.json the forecast was fitted on.
struct ForecastLadder {
  std::string dir, file, xxh64, name, metric;
  bool operator==(const ForecastLadder&) const = default;
};

// "inputs"."target": the run the forecast is for, bound as a rung of the ladder would train.
struct ForecastTarget {
  std::string name;       // a preset name or a config file, as given
  nlohmann::json config;  // ModelConfig::to_json()
  int64_t batch = 0;
  std::string batch_source;
  std::optional<double> rule_batch;  // null: the ladder lists its batch sizes
  int64_t steps = 0;
  std::string steps_source;
  double tokens_per_param = 0;
  uint64_t seed = 0;
  double lr_multiplier = 1;
  int64_t seq_len = 0;
  int64_t active_params = 0;
  double tokens = 0, compute_per_step = 0, compute = 0;
  // TrainOptions::to_json() at `bind`; absent in a forecast from before the binding.
  std::optional<nlohmann::json> options;
  std::optional<std::vector<std::string>> bind;
  std::string tokenizer_xxh64;
  std::optional<std::string> computed_dtype;  // null: no fitted run recorded its dtype
  std::string train_flags;
  bool operator==(const ForecastTarget&) const = default;
};

// "inputs"."law": the law forecast with and why.
struct ForecastLaw {
  LawSpec spec;
  std::string chosen_by;
  nlohmann::json comparison;  // each family's forward-holdout summary; null without --compare
  bool operator==(const ForecastLaw& o) const {
    return spec.to_json() == o.spec.to_json() && chosen_by == o.chosen_by &&
           comparison == o.comparison;
  }
};

// "inputs"."rungs": one per rung × budget, canaries included.
struct ForecastRung {
  std::string name, label;
  double tokens_per_param = 0;
  bool canary = false;
  std::vector<uint64_t> seeds;
  double compute_per_step = 0;
  int64_t steps = 0, batch = 0;
  std::optional<double> tokens;  // null in a ladder.json from before tokens were recorded
  int64_t active_params = 0;
  bool operator==(const ForecastRung&) const = default;
};

struct ForecastInputs {
  ForecastTarget target;
  ForecastLaw law;  // "l_inf" is written from law.spec
  int64_t fractions = 0;
  std::vector<ForecastRung> rungs;
  bool operator==(const ForecastInputs&) const = default;
};

// One loss series' fit at one fraction: the all-document loss ("fit", "predicted_loss", …) or
// the clean-only one ("clean_fit", "predicted_clean_loss", …).
struct SeriesForecast {
  nlohmann::json fit;               // PowerLawFit / ChinchillaFit to_json(); null: failed
  std::optional<double> predicted;  // null: the fit failed
  std::optional<std::string> error;
  std::optional<nlohmann::json> forward;   // the forward holdouts (forward_holdouts' array)
  std::optional<nlohmann::json> interval;  // absent unless drawn; null: it failed
  std::optional<std::string> interval_error;
  bool operator==(const SeriesForecast&) const = default;
};

// A canary's predicted loss at one fraction of its own steps ("fits"[k]."canaries").
struct CanaryPoint {
  std::string rung;
  int64_t step = 0;
  double compute = 0, predicted_loss = 0;
  bool operator==(const CanaryPoint&) const = default;
};

// "fits": one per fraction g = 5%, …, 100%.
struct FractionFit {
  double fraction = 0;
  int64_t target_step = 0;
  double target_compute = 0;
  nlohmann::json points;  // every fitted run's point at g (as in ladder.json)
  std::optional<std::vector<double>> means, weights;          // with seeds or weights only
  std::optional<double> target_active_params, target_tokens;  // the chinchilla law's N and D
  SeriesForecast all;
  std::optional<SeriesForecast> clean;
  std::vector<CanaryPoint> canaries;  // written when not empty
  bool operator==(const FractionFit&) const = default;
};

struct ForecastPrediction {
  std::optional<double> final_loss;
  nlohmann::json interval;          // Interval::to_json(); null when it could not be drawn
  std::string metric = "valid_ce";  // or "macro_loss"
  std::optional<double> clean_final_loss;
  std::optional<nlohmann::json> clean_interval;
  bool operator==(const ForecastPrediction&) const = default;
};

// "canaries": the chosen law's predictions of each canary, scored once it is trained.
struct CanaryForecast {
  struct At {
    double fraction = 0;
    int64_t step = 0;
    double compute = 0, predicted_loss = 0;
    bool operator==(const At&) const = default;
  };
  std::string name;
  int64_t steps = 0;
  uint64_t seeds = 0;
  std::vector<At> predictions;
  bool operator==(const CanaryForecast&) const = default;
};

struct Forecast {
  std::string format = "marin-forecast-v1";
  std::string created;  // UTC, 2025-01-31T12:34:56Z
  ForecastLadder ladder;
  ForecastInputs inputs;
  std::vector<FractionFit> fits;
  nlohmann::json forward_holdouts;  // summarise_forward of the fits
  ForecastPrediction prediction;
  std::vector<CanaryForecast> canaries;      // written when not empty
  std::optional<nlohmann::json> eval;        // the metric's definition (eval::MacroMetric JSON)
  std::optional<nlohmann::json> downstream;  // per metric spec: downstream_forecast()

  // The fit at fraction 100% (nullptr when the forecast has none).
  const FractionFit* final_fit() const;

  nlohmann::json to_json() const;
  // marin::Error on a JSON that is not an object, lacks "fits", or has a field of the wrong type.
  // The format is read, not checked (the tracker checks it).
  static Forecast from_json(const nlohmann::json& j);
  bool operator==(const Forecast&) const = default;
};

}  // namespace marin::scaling
