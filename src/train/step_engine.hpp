#pragma once
// One optimizer step over a global batch, and nothing about files. A step (StepEngine::step) is:
// the next global batch → this rank's micro-batches → forward/backward of each → their gradients
// summed exactly over micro-batches and ranks (parallel::ExactSum; each rank receives its
// optimizer shard) → global finite check → the sharded optimizer (parameters all-gathered) → QB
// bias from global histograms. A non-finite loss or gradient skips the update; a non-finite
// update is rolled back (UpdateGuard). The Trainer (trainer.hpp) calls it once per step.
//
// Data parallelism (docs/distributed.md): the global batch of B rows that one process would read
// is U = B / micro_batch micro-batches; with N ranks (N divides U) rank r computes micro-batches
// r, r + N, r + 2N, … (with U = N: rows r·B/N … (r+1)·B/N − 1). Losses are normalised by the
// global token count and gradients summed exactly, so a step's result depends on the micro-batch
// size but not on N: runs at 1, 2 or 4 ranks are bit-identical. Checkpoints hold the full state in
// the one-process layout (gather_full_state, load_full_state), so a run resumes at any N that
// divides U.
//
// Expert parallelism (--ep P, docs/distributed.md): the N ranks form N/P replicas of P ranks;
// each rank of a replica holds 1/P of every routed-expert stack, and the replica's ranks exchange
// rows with an all-to-all in every MoE layer. Each expert's weight gradient from each source
// micro-batch is computed where the expert lives and summed exactly with the others over the
// replicas of that shard, so dropless and capacity runs are bit-identical to one process too.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/prefault.hpp"
#include "data/batch_source.hpp"
#include "kernels/kernels.hpp"
#include "model/model.hpp"
#include "model/moe/qb_balance.hpp"
#include "model/moe/router_stats.hpp"
#include "optim/optimizer.hpp"
#include "parallel/comm.hpp"
#include "parallel/comm_thread.hpp"
#include "parallel/exact_sum.hpp"
#include "train/finite_check.hpp"
#include "train/sharded_checkpoint.hpp"
#include "train/sharded_params.hpp"
#include "train/train_options.hpp"

namespace marin {

// What one optimizer step did (identical on every rank).
struct StepResult {
  LossStats loss;          // over the global batch
  bool finite = true;      // false: the update was skipped
  nlohmann::json metrics;  // the step's metrics line so far
  // In collectives: the gradient sum and the parameter all-gather. With the gradient sum
  // overlapped with the backward (comm_overlapped), only the part of it the backward did not hide.
  double comm_seconds = 0;
  bool comm_overlapped = false;
  int64_t comm_bytes = 0;         // sent per rank by those collectives (0 on one rank)
  double all_to_all_seconds = 0;  // --ep > 1: the MoE layers' exchanges (forward and backward)
  int64_t all_to_all_bytes = 0;   // sent by this rank to the others of its group
};

// The parameters and optimizer state in the full (one-process) layout, as checkpoints hold them;
// complete on rank 0 only (gather_full_state).
struct FullState {
  // The full-layout values: in one process the model's and the optimizer's own buffers (no
  // copy: a checkpoint of cpu-small would otherwise hold 160 MB more at its peak), else what
  // was assembled below.
  const float* params = nullptr;
  const float* m = nullptr;
  const float* v = nullptr;
  Buffer<float> gathered, gathered_m, gathered_v;  // assembled (--ep > 1, --shard-params, DP)
};

class StepEngine {
 public:
  // Checks that `o`'s batch splits over `n_ranks` (micro-batches, --ep) and fills a micro-batch
  // left at 0 (default_micro_batch); refuses what cannot run, naming the option.
  static void check_shape(TrainOptions& o, int n_ranks);
  // The model (parameters uninitialised: init or load_full_state), its optimizer and the exact
  // gradient sum of a run with options `o` over `comm` (collective).
  StepEngine(const TrainOptions& o, parallel::Comm& comm);
  ~StepEngine();

  void init(uint64_t seed);
  // Faults in the parameters, gradients, partials and optimizer state, which the first step
  // touches whole, on a thread of their own (core/prefault.hpp): the Trainer calls it before a
  // fresh run initialises its weights (beside which it runs), and after a resume has loaded its
  // checkpoint (whose full-size temporaries would otherwise coexist with them).
  void start_prefault();
  // Loads full-layout parameters and optimizer state (m, v null: fresh); this rank takes its
  // expert shard.
  void load_full_state(const float* params, const float* m, const float* v);
  // Collective: the full-layout state, complete on rank 0.
  FullState gather_full_state();
  // This rank's part of the state as a sharded checkpoint stores it (sharded_checkpoint.hpp): the
  // runs of the table it updates (its optimizer shard of each region), in the full layout's terms.
  // Over all ranks they cover the full layout exactly once.
  std::vector<StatePiece> state_pieces();
  // Loads a sharded checkpoint reading only what this rank holds: the parameters of its table
  // (under --shard-params its run of the dense region) and its optimizer shards' m and v. Not
  // collective: a rank's error is its own (Trainer::start_from makes it every rank's).
  void load_sharded_state(const std::string& dir);
  // One optimizer step (collective) on the next global batch of `data`; `step` is the number of
  // steps completed before it (the schedule's position, the testing aids' step).
  StepResult step(BatchSource& data, int64_t step);
  // The global loss of the model as it is (forward only, dropless: an evaluation) on the next
  // global batch of `data` (collective).
  LossStats evaluate(BatchSource& data);

  Model<float>& model() { return *model_; }
  // The model with every parameter present while the result lives (collective): what work
  // outside a step that runs model() itself holds first (--shard-params; else nothing to do).
  WholeParams whole_params() { return WholeParams(*model_, shards_.get()); }
  const ParamTable& full_table() const { return *full_table_; }
  const TrainOptions& options() const { return opt_; }
  // What the GEMMs compute in: opt_.dtype resolved on this CPU.
  kernels::Dtype dtype() const { return dtype_; }
  int ep() const { return experts_ ? experts_->size() : 1; }
  parallel::Comm& comm() { return comm_; }

 private:
  // Forward (+ backward) over this rank's micro-batches of the batch in tokens_/labels_/seg_
  // (gradients of all but the last into partials_, the last in the model's grads()); returns the
  // global loss.
  LossStats forward_backward(bool backward);
  // The exact sum of every micro-batch's gradient into the model's grads(); false when it is not
  // finite. Fills out's communication fields.
  bool reduce_gradients(StepResult& out);
  // The partial gradients of this rank's micro-batches, as the exact sum takes them.
  std::vector<parallel::Partial> gradient_parts();
  // Testing aid: poisons the gradient on rank 0 at the steps --inject-nan-grad names.
  void inject_nan_grad();
  // The update of a finite step (router health, optimizer, QB, rollback of a non-finite update).
  void update(StepResult& out, int64_t step);
  // Collective: "" when the parameters and optimizer state the step just wrote are finite on
  // every rank, else what is not (UpdateGuard::check).
  std::string check_update(int64_t step);

  TrainOptions opt_;
  parallel::Comm& comm_;
  kernels::Dtype dtype_ = kernels::Dtype::fp32;
  int micro_ = 0, units_ = 0, local_units_ = 0;  // rows per micro-batch; micro-batches per step,
                                                 // and per rank
  std::unique_ptr<parallel::Comm> experts_, replicas_;  // --ep > 1: this rank's expert-parallel
                                                        // group and the replicas of its shard
  std::unique_ptr<ParamTable> full_table_;              // the one-process layout (checkpoints)
  std::unique_ptr<Model<float>> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<Buffer<float>> partials_;         // gradients of this rank's earlier micro-batches
  std::vector<Buffer<float>> expert_partials_;  // --ep > 1: their expert gradients, per source
  std::unique_ptr<parallel::ExactSum> grad_sum_;
  // --shard-params over more than one rank: the dense parameters, gathered unit by unit.
  std::unique_ptr<ShardedParams> shards_;
  // Local element i of tensor p (of this rank's table) is element base + i of the full tensor.
  int64_t full_element_base(const ParamInfo& p) const;
  // --shard-params: gives back the gradient pages of `r` outside this rank's shard (summed).
  void release_gradients(parallel::Range r);
  // --overlap under MPI: runs grad_sum_'s ranges during the last backward, and under --ep the
  // expert all-to-alls beside the experts (DispatchSettings::thread).
  std::unique_ptr<parallel::CommThread> comm_thread_;
  std::vector<parallel::Partial> parts_;  // what the thread's jobs sum
  double exposed_seconds_ = 0;            // the last step's wait for them
  int64_t step_now_ = 0;                  // the step being computed (0-based)
  UpdateGuard update_guard_;  // the state before this step's update, to undo a non-finite one
  std::unique_ptr<QBReducer> qb_reducer_;
  QBBalancer qb_;
  std::vector<Routing<float>> routing_log_;  // per layer: this rank's rows of the step (QB)
  std::vector<RouterStatsAccumulator> router_acc_;
  std::vector<int32_t> tokens_, labels_, seg_;  // the global batch
  // start_prefault's thread. Last, so it stops before any buffer it populates is freed.
  std::unique_ptr<Prefault> prefault_;
};

}  // namespace marin
