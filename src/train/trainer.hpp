#pragma once
// The training loop. One step (Trainer::train_step) is: the next global batch → this rank's
// micro-batches → forward/backward of each → their gradients summed exactly over micro-batches
// and ranks (parallel::ExactSum; each rank receives its optimizer shard) → global finite check →
// the sharded optimizer (parameters all-gathered) → QB bias from global histograms. Around it run()
// calls the hooks (validation, per-domain evaluation, anything a caller adds, e.g.
// scaling::ForecastHook), writes metrics and checkpoints (rank 0), and handles faults: non-finite
// steps are skipped and reported; SIGINT, SIGTERM and SIGUSR1 save a checkpoint and exit cleanly on
// every rank together.
//
// Data parallelism (docs/distributed.md): the global batch of B rows that one process would read
// is U = B / micro_batch micro-batches; with N ranks (N divides U) rank r computes micro-batches
// r, r + N, r + 2N, … (with U = N: rows r·B/N … (r+1)·B/N − 1). Losses are normalised by the
// global token count and gradients summed exactly, so a step's result depends on the micro-batch
// size but not on N: runs at 1, 2 or 4 ranks are bit-identical. Checkpoints hold the full state in
// the one-process layout, so a run resumes at any N that divides U.
//
// Expert parallelism (--ep P, docs/distributed.md): the N ranks form N/P replicas of P ranks;
// each rank of a replica holds 1/P of every routed-expert stack, and the replica's ranks exchange
// rows with an all-to-all in every MoE layer. Each expert's weight gradient from each source
// micro-batch is computed where the expert lives and summed exactly with the others over the
// replicas of that shard, so dropless and capacity runs are bit-identical to one process too.
#include <memory>
#include <string>
#include <vector>

#include "data/batch_source.hpp"
#include "kernels/kernels.hpp"
#include "model/model.hpp"
#include "model/moe/qb_balance.hpp"
#include "model/moe/router_stats.hpp"
#include "optim/optimizer.hpp"
#include "parallel/comm.hpp"
#include "parallel/exact_sum.hpp"
#include "train/finite_check.hpp"
#include "train/run_checkpoint.hpp"
#include "train/run_lock.hpp"

namespace marin {
namespace eval {
class MacroEvaluator;
}  // namespace eval

struct TrainResult {
  int64_t steps_done = 0;
  double last_loss = 0;
  double last_valid_ce = -1;
  nlohmann::json last_eval;   // the last per-domain evaluation (eval::summary), null if none
  nlohmann::json last_tasks;  // the last downstream-task scores (TaskResults::summary), or null
  bool interrupted = false;
  std::string last_checkpoint;
};

// What one optimizer step did (identical on every rank).
struct StepResult {
  LossStats loss;                 // over the global batch
  bool finite = true;             // false: the update was skipped
  nlohmann::json metrics;         // the step's metrics line so far
  double comm_seconds = 0;        // in collectives: the gradient sum and the parameter all-gather
  int64_t comm_bytes = 0;         // sent per rank by those collectives (0 on one rank)
  double all_to_all_seconds = 0;  // --ep > 1: the MoE layers' exchanges (forward and backward)
  int64_t all_to_all_bytes = 0;   // sent by this rank to the others of its group
};

class Trainer;
struct TrainerTasks;  // the run's downstream tasks, tokenizer and audit index (trainer.cpp)

// Work attached to the loop. after_step runs on every rank after each completed step (t.step() is
// the number of completed steps), collectively, and may add fields to the step's metrics line;
// after_metrics runs once that line is in RUN/metrics.jsonl (readers of the file see the step);
// at_end runs once when run() ends (schedule complete or interrupted).
class TrainHook {
 public:
  virtual ~TrainHook() = default;
  virtual void after_step(Trainer& t, nlohmann::json& metrics) {}
  virtual void after_metrics(Trainer& t) {}
  virtual void at_end(Trainer& t, TrainResult& r) {}
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
  // The run's downstream tasks (--tasks) scored with the model as it is, forward passes split
  // over the ranks (collective); the record of the step's metrics line (TaskResults::summary).
  // Rank 0 also writes the harness-layout results to RUN/tasks/step-N.json. The tasks, tokenizer
  // and the audit's n-gram index (of the mixture's training text, when the token manifest's
  // corpus exists here) are loaded on the first call.
  nlohmann::json evaluate_tasks();
  std::string save_checkpoint();

  Model<float>& model() { return *model_; }
  const TrainOptions& options() const { return opt_; }
  const std::string& run_dir() const { return run_dir_; }
  // What the GEMMs compute in: opt_.dtype ("auto", ...) resolved on this CPU at setup.
  kernels::Dtype dtype() const { return dtype_; }
  int64_t step() const { return step_; }
  parallel::Comm& comm() { return *comm_; }
  bool is_root() const { return comm_->is_root(); }
  // Rank 0 appends a line to RUN/metrics.jsonl (other ranks do nothing).
  void write_metrics(const nlohmann::json& j);

 private:
  Trainer() = default;
  // resume() from one checkpoint, after checking its state (run_state_check.hpp).
  static std::unique_ptr<Trainer> resume_from(const std::string& ckpt_dir,
                                              const std::string& run_dir, parallel::Comm* comm,
                                              const ResumeChanges& changes,
                                              std::shared_ptr<RunLock> lock);
  // fresh: a new run (a run directory holding a run is refused, or moved aside on overwrite).
  void setup(const TrainOptions& o, const std::string& run_dir, parallel::Comm* comm,
             bool fresh = true);
  // Runs forward (+ backward) over this rank's micro-batches of the global batch in
  // tokens_/labels_/seg_ (gradients of all but the last into partials_, the last in the model's
  // grads()); returns the global loss.
  LossStats forward_backward(bool backward);
  // Loads full-layout (one-process) parameters and optimizer state (m, v null: fresh): this
  // rank takes its expert shard.
  void load_full_state(const float* params, const float* m, const float* v);
  int ep() const { return experts_ ? experts_->size() : 1; }
  // Collective: "" when the parameters and optimizer state the step just wrote are finite on
  // every rank, else what is not (UpdateGuard::check).
  std::string check_update();

  TrainOptions opt_;
  std::string run_dir_;
  parallel::Comm* comm_ = nullptr;
  kernels::Dtype dtype_ = kernels::Dtype::fp32;
  int micro_ = 0, units_ = 0, local_units_ = 0;  // rows per micro-batch; micro-batches per step,
                                                 // and per rank
  std::unique_ptr<parallel::Comm> experts_, replicas_;  // --ep > 1: this rank's expert-parallel
                                                        // group and the replicas of its shard
  std::unique_ptr<ParamTable> full_table_;              // the one-process layout (checkpoints)
  std::unique_ptr<Model<float>> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<BatchSource> data_, valid_;
  std::vector<Buffer<float>> partials_;         // gradients of this rank's earlier micro-batches
  std::vector<Buffer<float>> expert_partials_;  // --ep > 1: their expert gradients, per source
  std::unique_ptr<parallel::ExactSum> grad_sum_;
  std::shared_ptr<RunLock> lock_;  // rank 0: RUN/run.lock, held for the trainer's life
  UpdateGuard update_guard_;       // the state before this step's update, to undo a non-finite one
  std::unique_ptr<QBReducer> qb_reducer_;
  QBBalancer qb_;
  std::vector<Routing<float>> routing_log_;  // per layer: this rank's rows of the step (QB)
  std::vector<RouterStatsAccumulator> router_acc_;
  int64_t step_ = 0;
  nlohmann::json lineage_;
  std::vector<int32_t> tokens_, labels_, seg_;  // the global batch
  FILE* metrics_ = nullptr;
  std::string metrics_error_;  // rank 0: the failed write of metrics.jsonl, if any
  std::unique_ptr<eval::MacroEvaluator> all_domains_;
  std::unique_ptr<TrainerTasks> tasks_;
  std::vector<std::unique_ptr<TrainHook>> hooks_;
};

// Builds a batch source from a data spec ({"kind": "rows", "path": ...}, ...).
// {"kind": "rows", "path"}, {"kind": "mixture", "tokens": TOKDIR, "mixture": {...}} or
// {"kind": "valid", "tokens": TOKDIR, "domains": [...]}; null → nullptr.
std::unique_ptr<BatchSource> make_batch_source(const nlohmann::json& spec, const TrainOptions& o);

}  // namespace marin
