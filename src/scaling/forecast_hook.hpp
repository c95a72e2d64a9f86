#pragma once
// Tracking a pre-registered forecast during training (`marin train --forecast`): a TrainHook that
// scores the run at every fraction the forecast predicts, with the forecast's own metric (the
// validation CE, or the macro loss with exactly the forecast's documents, budget and audit), adds
// {predicted, actual, diff} to those steps' metrics, and at the end of the schedule writes
// RUN/forecast_report.json (beat/miss in nats and percent, also on clean-only documents).
#include <memory>
#include <set>

#include "eval/macro_metric.hpp"
#include "scaling/downstream.hpp"
#include "scaling/forecast.hpp"
#include "train/trainer.hpp"

namespace marin::scaling {

class ForecastHook final : public TrainHook {
 public:
  // Reads the forecast named by t.options().forecast (marin::Error if it does not fit the run).
  explicit ForecastHook(Trainer& t);
  void after_step(Trainer& t, nlohmann::json& metrics) override;
  void at_end(Trainer& t, TrainResult& r) override;

 private:
  ForecastTracker tracker_;
  std::set<int64_t> steps_;
  bool macro_ = false;
  std::unique_ptr<eval::MacroEvaluator> evaluator_;
  std::optional<double> last_loss_, last_clean_;
  nlohmann::json canaries_;  // score_canaries(), at the start
  // The forecast's downstream metrics (forecast.json "downstream"), scored from the run's own
  // task evaluations (--tasks) at the steps the forecast predicts and at the end.
  struct Downstream {
    std::string name;
    DownstreamSpec spec;
    nlohmann::json forecast;                            // its "downstream" record
    nlohmann::json observed = nlohmann::json::array();  // {step, predicted, actual, diff}
    std::optional<double> last;                         // at the latest task evaluation
    std::string error;                                  // why it could not be scored
  };
  std::vector<Downstream> downstream_;
  void observe_downstream(int64_t step, const nlohmann::json& task_scores, nlohmann::json& m);
  nlohmann::json downstream_report() const;
};

// Adds a ForecastHook when the run's options name a forecast.
void attach_forecast(Trainer& t);

}  // namespace marin::scaling
