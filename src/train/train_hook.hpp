#pragma once
// Work attached to the training loop. The Trainer's own evaluations (validation, per-domain
// evaluation, downstream tasks: train/hooks/) are hooks like any a caller adds (the forecast
// tracker, scaling/forecast_hook.hpp; the report, report/report_hook.hpp); each decides its own
// cadence. They run in the order they were added, the Trainer's own first.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace marin {

class Trainer;

struct TrainResult {
  int64_t steps_done = 0;
  double last_loss = 0;
  double last_valid_ce = -1;
  nlohmann::json last_eval;   // the last per-domain evaluation (eval::summary), null if none
  nlohmann::json last_tasks;  // the last downstream-task scores (TaskResults::summary), or null
  bool interrupted = false;
  std::string last_checkpoint;
};

// after_step runs on every rank after each completed step (t.step() is the number of completed
// steps), collectively, and may add fields to the step's metrics line; after_metrics runs once
// that line is in RUN/metrics.jsonl (readers of the file see the step); at_end runs once when
// run() ends (schedule complete or interrupted).
class TrainHook {
 public:
  virtual ~TrainHook() = default;
  virtual void after_step(Trainer& t, nlohmann::json& metrics) {}
  virtual void after_metrics(Trainer& t) {}
  virtual void at_end(Trainer& t, TrainResult& r) {}
};

// True at the steps an evaluation every `every` steps runs (0: never), and at the end of the
// schedule when `at_end`.
inline bool due_at(int64_t step, int64_t every, int64_t steps, bool at_end = true) {
  return (every > 0 && step % every == 0) || (at_end && step == steps);
}

}  // namespace marin
