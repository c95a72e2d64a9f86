#pragma once
// Forecasting a downstream metric from the loss (docs/scaling.md, "Downstream metrics"): the
// two-step forecast of Marin and Llama 3 — compute → loss by the ladder's law (forecast.hpp),
// then loss → metric by a link fitted across every evaluation of every rung:
//
//     m(L) = floor + (ceiling − floor) · σ(−k · (L − L0)) = floor + (ceiling − floor) / (1 +
//     e^(k·(L − L0)))
//
// a logistic in the loss with the chance level as its floor (m → floor as the loss grows, → the
// ceiling as it falls; k > 0 when the metric improves with loss). floor and ceiling are fixed
// (`--metric-floor`, `--metric-ceiling`: 0 and 1 by default; give 0.25 for a 4-way multiple
// choice); k and L0 are least squares in metric space (Levenberg–Marquardt from the straight line
// of logit((m − floor)/(ceiling − floor)) on L).
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "scaling/forecast_types.hpp"

namespace marin::scaling {

struct LinkFit {
  double floor = 0, ceiling = 1;  // fixed
  double k = 0, l0 = 0;           // fitted
  int64_t n = 0;
  double sse = 0, rmse = 0, r2 = 0;  // in metric space
  double predict(double loss) const;
  nlohmann::json to_json() const;  // {"law": "logistic_in_loss", "formula", "floor", ...}
};

// Least squares of the link over (loss, metric) pairs. marin::Error when there are fewer than 3
// points, the losses are all equal, or floor ≥ ceiling. Starts from the logit line and a grid of
// slopes and midpoints, or, given `near` (a bootstrap's refit of resampled values), from the
// logit line and `near`'s (k, L0) only.
LinkFit fit_loss_link(const std::vector<double>& loss, const std::vector<double>& metric,
                      double floor = 0, double ceiling = 1, const LinkFit* near = nullptr);

// `--metric TASK/METRIC` (every item) or `TASK/clean/METRIC` (the items the audit found clean).
struct DownstreamSpec {
  std::string text;  // as given
  std::string task, metric;
  bool clean = false;
  double floor = 0, ceiling = 1;
};
DownstreamSpec parse_downstream_metric(const std::string& text);

// The metric of `spec` in one evaluation's task scores (a metrics line's "tasks"."tasks":
// {TASK: {METRIC, "clean": {METRIC}}}): its value, nullopt when the subset is empty (a null
// metric), and marin::Error `where: ...` when the task or the metric is missing.
std::optional<double> downstream_value(const nlohmann::json& task_scores,
                                       const DownstreamSpec& spec, const std::string& where);

// The forecast's "downstream" record of one metric: the (loss, metric) points of every done rung
// that is not a canary (ladder.json's curves, with "tasks" at every point: a ladder with a
// [tasks] table), the link fit, a forward holdout (the link fitted without the largest rung
// predicts that rung's metric from its own losses), and the target's metric at every fraction of
// `forecast` ("fits"[].predicted_loss carried through the link) and at 100% with the loss's
// prediction interval carried through it. marin::Error naming the rung and step when a point
// lacks the metric.
nlohmann::json downstream_forecast(const nlohmann::json& ladder, const Forecast& forecast,
                                   const DownstreamSpec& spec);
// The same for a forecast as read from its file (Forecast::from_json).
nlohmann::json downstream_forecast(const nlohmann::json& ladder, const nlohmann::json& forecast,
                                   const DownstreamSpec& spec);

}  // namespace marin::scaling
