#pragma once
// The training loop, wiring the rooms of train/ together. run() is, per step: the step engine's
// optimizer step on the next global batch (step_engine.hpp: micro-batches, exact reduction,
// finite checks, rollback) → the hooks at their cadence (validation, per-domain evaluation,
// downstream tasks: train/hooks/; then anything a caller adds, e.g. scaling::ForecastHook,
// report::attach_report) → the metrics line (metrics_log.hpp, rank 0) → a checkpoint when one is
// due (checkpoint_store.hpp, rank 0 writes). Non-finite steps are skipped and reported; SIGINT,
// SIGTERM and SIGUSR1 save a checkpoint and exit cleanly on every rank together. The data sources
// come from data/batch_factory.hpp.
#include <memory>
#include <string>
#include <vector>

#include "data/batch_source.hpp"
#include "kernels/kernels.hpp"
#include "model/model.hpp"
#include "parallel/comm.hpp"
#include "train/checkpoint_store.hpp"
#include "train/metrics_log.hpp"
#include "train/run_lock.hpp"
#include "train/step_engine.hpp"
#include "train/train_hook.hpp"
#include "train/train_options.hpp"

namespace marin {
namespace eval {
class MacroEvaluator;
}  // namespace eval

class ValidationHook;
class DomainEvalHook;
class TasksHook;

// --time-limit's clock. It counts from the end of this invocation's first completed step, not
// from its start: the first step's warm-up (oneDNN's JIT, first-touch memory) took 18–27 s on a
// 2-vCPU machine, so a limit of a minute or less trained one step. step_done(now) is called after
// each completed step with the seconds since the loop began; it is true once limit_s (> 0)
// seconds have passed since the first step completed (never at the first step itself).
class TimeLimit {
 public:
  explicit TimeLimit(double limit_s) : limit_s_(limit_s) {}
  bool step_done(double now_s) {
    if (first_done_s_ < 0) {
      first_done_s_ = now_s;
      return false;
    }
    return limit_s_ > 0 && now_s - first_done_s_ >= limit_s_;
  }

 private:
  double limit_s_;
  double first_done_s_ = -1;  // when the first step completed (-1: not yet)
};

class Trainer {
 public:
  // A new run in run_dir (created), optionally starting from a model checkpoint (`init_dir`).
  // `comm`: the data-parallel group (default: the job's world).
  Trainer(const TrainOptions& o, const std::string& run_dir, const std::string& init_dir = "",
          parallel::Comm* comm = nullptr);
  // Continues the run in run_dir from its newest complete checkpoint, with `changes` (the
  // transport switch is recorded in the run's lineage).
  static std::unique_ptr<Trainer> resume(const std::string& run_dir, parallel::Comm* comm = nullptr,
                                         const ResumeChanges& changes = {});
  // A new run in run_dir that starts from a checkpoint with some options changed.
  static std::unique_ptr<Trainer> fork(const std::string& ckpt_dir, const std::string& run_dir,
                                       const TrainOptions& changed, parallel::Comm* comm = nullptr);
  ~Trainer();

  TrainResult run();
  // One optimizer step (collective); advances step().
  StepResult train_step();
  void add_hook(std::unique_ptr<TrainHook> h) { hooks_.push_back(std::move(h)); }

  // Mean validation CE over eval_batches global batches (dropless); -1 without validation data.
  double validate();
  // Macro loss / BPB over the validation domains (eval::summary) with this evaluator (documents
  // split over the ranks), or every domain of the run's token directory when null.
  nlohmann::json evaluate_domains(const eval::MacroEvaluator* ev = nullptr);
  // The run's downstream tasks (--tasks) scored with the model as it is (TasksHook::evaluate).
  nlohmann::json evaluate_tasks();
  std::string save_checkpoint();

  Model<float>& model() { return engine_->model(); }
  StepEngine& engine() { return *engine_; }
  const TrainOptions& options() const { return opt_; }
  const std::string& run_dir() const { return run_dir_; }
  // What the GEMMs compute in: opt_.dtype ("auto", ...) resolved on this CPU at setup.
  kernels::Dtype dtype() const { return engine_->dtype(); }
  int64_t step() const { return step_; }
  parallel::Comm& comm() { return *comm_; }
  bool is_root() const { return comm_->is_root(); }
  // Rank 0 appends a line to RUN/metrics.jsonl (other ranks do nothing).
  void write_metrics(const nlohmann::json& j) { metrics_->write(j); }

 private:
  Trainer() = default;
  // fresh: a new run (a run directory holding a run is refused, or moved aside on overwrite).
  void setup(const TrainOptions& o, const std::string& run_dir, parallel::Comm* comm,
             bool fresh = true);
  // The training source, with a warning (or, --strict-data, an error) when the run reads it more
  // than once.
  void open_data();
  // Loads a checkpoint's state and position (resume, fork).
  void start_from(const ResumePoint& p);
  // The end of a step in run(): the step's metrics completed by the hooks and written.
  void finish_step(StepResult& r, double seconds, TrainResult& res);
  // Stops the run (a checkpoint, true) when a signal, the time limit (`out_of_time`: this rank's
  // TimeLimit) or a failed metrics write says so on any rank.
  bool stop_if_asked(bool out_of_time, TrainResult& res);

  TrainOptions opt_;
  std::string run_dir_;
  parallel::Comm* comm_ = nullptr;
  std::shared_ptr<RunLock> lock_;  // rank 0: RUN/run.lock, held for the trainer's life
  std::unique_ptr<StepEngine> engine_;
  std::unique_ptr<CheckpointStore> store_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<BatchSource> data_;
  int64_t step_ = 0;
  nlohmann::json lineage_;
  int bad_in_row_ = 0;                    // consecutive non-finite steps
  ValidationHook* validation_ = nullptr;  // the built-in hooks, owned by hooks_
  DomainEvalHook* domains_ = nullptr;
  TasksHook* tasks_ = nullptr;
  std::vector<std::unique_ptr<TrainHook>> hooks_;
};

}  // namespace marin
