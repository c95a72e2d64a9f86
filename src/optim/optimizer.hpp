#pragma once
// The optimizer of a whole model (recipe §5): walks the parameter table and applies MuonH, AdamH
// or Adam to each tensor by its group, with the warmup/linear-decay schedule on both learning
// rates. `adamw` mode is the ablation baseline: AdamW on every trained tensor. All state lives in
// two flat buffers with the parameter layout, so checkpoints store them as they are.
//
// Distributed (ZeRO-1): over a data-parallel group of N ranks the tensors are split into N
// contiguous runs of the table balanced by update cost (Newton–Schulz dominates), and each rank
// holds the m/v state of its run only and updates only those tensors; the updated parameters are
// then all-gathered so every rank has the full model. gather_state / load_state convert to and
// from the full layout that checkpoints store, so a checkpoint does not depend on N.
//
// Expert parallelism: the flat buffer is regions (ParamTable: the dense tensors, then this rank's
// expert slices), each shared by a different group of ranks — the dense region by all ranks, the
// expert region by the data-parallel replicas of the same expert shard. Each region is split over
// its own group as above; a routed-expert stack's layer radius is summed over the expert-parallel
// group (`experts`), whose ranks update the slices of the same stack together.
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "model/params.hpp"
#include "optim/adam.hpp"
#include "optim/muonh.hpp"
#include "parallel/comm.hpp"

namespace marin {

struct OptimConfig {
  std::string kind = "muonh";        // "muonh" (the recipe) or "adamw" (baseline)
  double muonh_lr = 0, adam_lr = 0;  // peak learning rates
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  optim::RadiusScope expert_radius = optim::RadiusScope::kLayer;
  bool gate_router_wd =
      false;              // the 535B run's optional decay on head gate + router (from step 58,014)
  double adamw_wd = 0.1;  // decoupled decay of the adamw baseline
  // Newton–Schulz's products: "compute" (default), the run's --dtype — bf16 where the run computes
  // in bf16, as the 535B run did; within 0.04 % of fp32 over 200 cpu-small steps — or "fp32".
  std::string ns_dtype = "compute";
  int64_t total_steps = 1;  // schedule horizon N

  kernels::Precision ns_products() const {
    return ns_dtype == "fp32" ? kernels::Precision::fp32 : kernels::Precision::compute;
  }
};

// A region of the flat parameter buffer and the ranks that hold the same values there (null:
// this process alone).
struct ParamRegion {
  parallel::Range range;
  parallel::Comm* group = nullptr;
  // false: the updated values stay with the rank that updated them, not all-gathered
  // (--shard-params: the model gathers each unit when it reads it, train/sharded_params.hpp).
  bool gather = true;
};

struct LearningRates {
  double muonh = 0, adam = 0, wd = 0;
};

class Optimizer {
 public:
  // group: the data-parallel ranks that share the update (null: this process does all of it).
  Optimizer(const ParamTable& table, const OptimConfig& cfg, parallel::Comm* group = nullptr);
  // regions: the table's regions in order, covering [0, total()); experts: the expert-parallel
  // group (null without expert parallelism).
  Optimizer(const ParamTable& table, const OptimConfig& cfg, std::vector<ParamRegion> regions,
            parallel::Comm* experts);
  ~Optimizer();
  const OptimConfig& config() const { return cfg_; }
  void set_config(const OptimConfig& cfg) { cfg_ = cfg; }  // e.g. a fork that changes the horizon
  LearningRates rates(int64_t step) const;
  // One update at 0-based `step` (Adam bias correction counts it as step + 1). `grads` must be
  // the full (reduced) gradient on every rank; on return `params` is the full updated model on
  // every rank. Collective over the group.
  void step(float* params, const float* grads, int64_t step);

  // m and v in this table's layout (table().total() elements each) on the ranks that are rank 0
  // of a region's group, filled in those regions (zeros elsewhere); collective. On ranks that are
  // no region's root, m and v are left empty.
  void gather_state(Buffer<float>& m, Buffer<float>& v) const;
  // Takes this rank's part of m and v in this table's layout (table().total() elements each).
  void load_state(const float* m, const float* v);
  // Per region: the consecutive ranges of it that the ranks of its group update.
  struct Region {
    ParamRegion where;
    std::vector<parallel::Range> shards;  // per rank of the group
    std::vector<int64_t> counts, displs;  // the shards as a gather's counts and displacements
    int rank = 0;                         // this rank in the group
    int64_t state_at = 0;                 // where this rank's shard starts in its m/v buffers
    parallel::Range own() const { return shards[size_t(rank)]; }
  };
  const std::vector<Region>& regions() const { return regions_; }
  // True when this rank updates the tensor starting at `offset`.
  bool owns(int64_t offset) const;
  int64_t total() const { return table_.total(); }
  double last_gather_seconds() const { return gather_seconds_; }  // the step's all-gather
  // This rank's shard of m and v (the layout of shard()): the trainer's finite check reads them
  // and its rollback of a non-finite update restores them (src/train/finite_check.hpp).
  Buffer<float>& local_m() { return m_; }
  Buffer<float>& local_v() { return v_; }

 private:
  struct ExpertStackSum;
  // The region and m/v index of the tensor at `offset` when this rank updates it.
  const Region* region_of(int64_t offset) const;
  static float* state_of(const ParamInfo& p, const Region& r, Buffer<float>& m_or_v);
  bool updated_as_task(const ParamInfo& p) const;
  void update_matrices(std::vector<const ParamInfo*> matrices, float* params, const float* grads,
                       double lr);
  int64_t workspace_size() const;
  const ParamTable& table_;
  OptimConfig cfg_;
  std::vector<Region> regions_;
  std::unique_ptr<ExpertStackSum> stack_sum_;  // null without expert parallelism
  Buffer<float> m_, v_, work_;                 // m_, v_: this rank's shards only
  double gather_seconds_ = 0;
};

}  // namespace marin
