#pragma once
// The steps of make_forecast (forecast.hpp), named after the protocol of recipe.md §9 and
// exposed so that each is unit-tested on small hand-made series
// (tests/scaling/test_forecast_parts.cpp):
//   gather   read ladder.json, check every fitted run is done on the same dtype and fractions,
//            group the runs by rung × budget and average their seeds at a fraction (series_at);
//   target   the target's batch, steps, budget, bound options and compute (plan_target);
//   fit      each law at every fraction (run_law), on the all-document and clean-only losses;
//   holdouts every rung but the smallest two predicted from the smaller ones (forward_holdouts);
//   choose   the law of smallest forward-holdout RMSE, or the one given (choose_law);
//   interval the bootstrap prediction interval of the target (compute_law_interval);
//   predict  the target's and the canaries' predictions, assembled into forecast.json.
// Nothing here is part of the public interface: make_forecast is.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scaling/fit.hpp"
#include "scaling/forecast.hpp"
#include "scaling/forecast_types.hpp"
#include "scaling/ladder.hpp"

namespace marin::scaling::forecast_parts {

// The runs of one rung at one token budget (one per seed), in ladder order.
struct Group {
  std::string name;   // the rung
  std::string label;  // the rung at its budget: "d128-tpp5" (the name when it has one budget)
  double tpp = 0;     // tokens per active parameter
  int rung = 0;       // the rung's index (by name) in ladder order: smaller rungs first
  bool canary = false;
  std::vector<const nlohmann::json*> runs;
  double n_params() const;
  double tokens() const;  // at 100%
  int64_t steps() const;
  double compute_per_step() const;
};

// The ladder's runs grouped by label (ladder.json "rungs"; the pointers point into `ladder`).
std::vector<Group> group_runs(const nlohmann::json& ladder);

// The fitted rungs at one fraction: compute, each rung's mean loss over its seeds, the weights
// (inverse variance of each mean; empty: equal) and the noise the interval draws from.
struct Series {
  std::vector<double> c, mean, w;
  PointNoise noise;
  bool complete = true;  // every run has the loss (a clean-only loss may be missing)
};
// The non-canary groups' `key` ("loss" or "clean_loss") at curve point k (fraction (k+1)/20).
Series series_at(const std::vector<Group>& groups, size_t k, const char* key);

// Forward holdouts at one fraction: every rung but the smallest two, predicted from the smaller
// rungs only: [{rung, from_rungs, actual, predicted, diff_nats} or {…, predicted: null, failed}].
nlohmann::json forward_holdouts(const Series& s, const std::vector<std::string>& names,
                                const Fitter& fit);
// Forward holdouts (arrays of forward_holdouts) summarised per held-out rung and over all:
// {n, rmse, mean_diff_nats, rung_beat_forecast, rungs: [...]}.
nlohmann::json summarise_forward(const std::vector<nlohmann::json>& forwards);

// gather: ladder.json read and checked (every fitted run done, on one dtype, with every
// fraction), its runs grouped.
struct LadderData {
  std::string file, hash;  // DIR/ladder.json and its xxh64
  nlohmann::json ladder;
  std::vector<Group> groups;         // point into `ladder`: a LadderData is not copied
  std::set<std::string> budget_set;  // the fitted runs' budgets, as budget_label prints them
  std::string computed_dtype;        // empty when no run recorded one
  LadderConfig recipe;
  size_t budgets() const { return budget_set.size(); }
  bool several() const { return budget_set.size() > 1; }
  LadderData() = default;
  LadderData(const LadderData&) = delete;
  LadderData& operator=(const LadderData&) = delete;
};
void gather_ladder(const ForecastOptions& o, LadderData& d);

// target: the run the forecast is for, as a rung of the ladder would be trained.
struct TargetPlan {
  int64_t batch = 0, steps = 0;
  bool batch_override = false;
  double tpp = 0;
  TrainOptions options;
  nlohmann::json bound;  // options.to_json() at bound_option_keys()
  std::string tokenizer_hash;
  double per_step = 0;        // forecast compute per step
  int64_t active_params = 0;  // N
  double tokens = 0;          // D
};
TargetPlan plan_target(const ForecastOptions& o, const LadderData& d);

// What every law's fit reads: the ladder, the target and the groups a law in C fits (those at the
// target's budget; every group on a ladder of one budget).
struct FitContext {
  const ForecastOptions& o;
  const LadderData& d;
  const TargetPlan& t;
  std::vector<Group> cgroups;
  std::vector<std::string> names;  // the fitted labels of cgroups
};
FitContext fit_context(const ForecastOptions& o, const LadderData& d, const TargetPlan& t);

// One law over every fraction: the fits (forecast.json "fits") and the target's prediction and
// interval at 100%, on all documents and clean-only.
struct LawRun {
  std::vector<FractionFit> fits;
  std::optional<double> final_loss, final_clean;
  nlohmann::json final_interval, final_clean_interval;
};
// fit: the law of `spec` (chinchilla or one in C); `full` adds the intervals and the canaries.
LawRun run_law(const FitContext& x, const LawSpec& spec, bool full);
// The all-document forward holdouts of every fraction that has them.
std::vector<nlohmann::json> forwards_of(const std::vector<FractionFit>& fits);

// interval: the bootstrap interval of a law in C at `target_compute`, recorded in `out`
// (interval, or a null interval and interval_error); returned when it could be drawn.
std::optional<Interval> compute_law_interval(const Series& s, const LawSpec& spec,
                                             const Fitter& fitter, double target_compute,
                                             double level, int replicates, uint64_t seed,
                                             SeriesForecast& out);

// choose: the law to forecast with and the comparison ("law"."comparison"; null without
// o.compare). Each family's forward holdouts are summarised; unless the law is given, the one of
// smallest RMSE (over every fraction; with several budgets over the end-of-run holdouts at the
// target's budget) is chosen.
struct Choice {
  LawSpec spec;
  nlohmann::json comparison;
};
Choice choose_law(const FitContext& x);
// The comparison's criterion for one family's summary: the RMSE it is ranked by, if any.
std::optional<double> comparison_rmse(const nlohmann::json& summary, bool several_budgets);

// predict: the canaries' predictions of the chosen law (forecast.json "canaries").
std::vector<CanaryForecast> canary_predictions(const std::vector<Group>& groups,
                                               const std::vector<FractionFit>& fits);

}  // namespace marin::scaling::forecast_parts
