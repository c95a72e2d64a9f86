#pragma once
// The cluster planner (docs/cluster_planner.md): for a model, a hardware file and a layout it
// derives the mesh (replica × data × expert), per-GPU memory, the pooled-wave capacities, the
// all-to-all bytes of each expert transport and a roofline estimate of step time and MFU. It is
// arithmetic on the accounting module's exact counts and the parameter table; nothing runs.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/pooled_capacity.hpp"
#include "plan/cluster_hw.hpp"

namespace marin {

// Per layer and step each GPU's routed rows cross the all-to-all six times: dispatch and combine
// in the forward pass, again in the rematerialised forward (full remat recomputes the layer,
// both exchanges included, because the combine's backward needs the expert outputs), and the
// two backward duals (the combine's gradient out, the dispatch's gradient back).
inline constexpr int kA2aTransfersPerLayer = 6;
// Executed FLOPs = 4·F_fwd per token: forward, rematerialised forward, backward (2·F_fwd).
inline constexpr int kComputePasses = 4;
// HBM traffic of one layer's activations per step: written by the forward and by the remat,
// read by the backward, which also writes gradients of the same size.
inline constexpr int kActivationHbmPasses = 4;

struct ClusterOptions {
  int64_t racks = 1;                // racks or nodes: the hardware file's unit
  int64_t gpus_per_rack = 0;        // 0: the most GPUs of a unit that divide num_experts
  int64_t ep = 0;                   // expert-parallel width; 0: the GPUs of one NVLink domain used
  int64_t waves = 3;                // pooled-wave transport
  int64_t batch = 0;                // sequences per step; 0: chosen (ClusterPlan::batch_origin)
  int64_t preset_batch = 0;         // the preset's own batch, used when batch is 0 and it splits
  double capacity_factor = 0;       // 0: the model config's
  double compute_efficiency = 0.7;  // achieved fraction of the bf16 peak on the model's GEMMs
  double comm_efficiency = 0.8;     // achieved fraction of link bandwidth in collectives
};

// The parameter table split the way a mesh shards it (exact element counts).
struct ParamSplit {
  int64_t expert = 0;          // routed-expert stacks: sharded along the expert axis, all MuonH
  int64_t other = 0;           // every other trained tensor: sharded over data × expert
  int64_t state = 0;           // router bias: stored, never trained
  int64_t muon_other = 0;      // MuonH elements of `other` (one momentum each)
  int64_t adam = 0;            // Adam and AdamH elements (two moments each)
  double ns_flops_expert = 0;  // one Newton–Schulz of every expert matrix (optim::ns_flops)
  double ns_flops_other = 0;   // ... of every other MuonH matrix
};
ParamSplit split_params(const ModelConfig& c);

struct ClusterMesh {
  int64_t racks = 0, gpus_per_rack = 0, gpus = 0;
  int64_t replica = 0, data = 0, expert = 0;  // replica × data × expert = gpus
  int64_t shard_group = 0;  // data × expert: the GPUs that together hold one copy of the model
  int64_t experts_per_gpu = 0, sequences_per_gpu = 0, tokens_per_gpu = 0;
  int64_t ep_peers_nvlink = 0, ep_peers_network = 0;  // of a GPU's expert − 1 EP peers
  bool shard_group_on_nvlink = false;
};

struct GpuMemory {                               // bytes per GPU
  double expert_weights = 0, other_weights = 0;  // fp32 (the 535B run's on-device master)
  double gradients = 0;                          // fp32, sharded like the weights
  double layer_inputs = 0;                       // bf16, the only activations full remat keeps
  double layer_working_set = 0;  // bf16, one layer's saved tensors while it is recomputed
  double weight_gather = 0;      // bf16, the largest tensor group an FSDP all-gather assembles
  double optimizer_state = 0;    // fp32 moments, on pinned host memory as in the 535B run
  double device() const {
    return expert_weights + other_weights + gradients + layer_inputs + layer_working_set +
           weight_gather;
  }
};

struct TransportEstimate {
  std::string name;        // dropless, capacity, pooled
  double rows_sent = 0;    // per exchange per layer, rows leaving the GPU
  double expert_rows = 0;  // per layer, rows the GPU's local experts run their GEMMs over
  double buffer_rows = 0;  // per layer, the fixed receive buffer (0: ragged, no fixed size)
  double bytes_per_step = 0, nvlink_bytes = 0, network_bytes = 0;
  double executed_flops = 0;  // per GPU per step, padding included
  double a2a_s = 0, compute_s = 0, comm_s = 0;
  double step_serial_s = 0, step_overlap_s = 0, mfu_serial = 0, mfu_overlap = 0;
  // The whole run (ClusterPlan::set_steps): wall-clock seconds and GPU-hours, serial / overlapped.
  double run_serial_s = 0, run_overlap_s = 0, gpu_hours_serial = 0, gpu_hours_overlap = 0;
};

struct ClusterPlan {
  ClusterHardware hw;
  int64_t batch = 0;         // sequences per step
  std::string batch_origin;  // "--batch", "the preset's" or the hardware file's default
  int64_t steps = 0;         // the run's steps, once set_steps is called (0: not known)
  ClusterMesh mesh;
  GpuMemory memory;
  int64_t waves = 0;
  double capacity_factor = 0, compute_efficiency = 0, comm_efficiency = 0;
  PooledCapacity pooled;
  int64_t capacity_rows_per_expert = 0;  // capacity transport: ceil(cf·expert·T_local·K/E)
  int64_t row_bytes = 0;                 // one routed row: latent_dim bf16 values
  double model_flops_per_step = 0;       // 3·F_fwd·S·batch (recipe §6): the MFU numerator
  double model_flops_per_gpu = 0;
  double hbm_s = 0;                       // activation traffic (kActivationHbmPasses)
  double ns_flops_per_gpu = 0, ns_s = 0;  // MuonH's Newton–Schulz (not model FLOPs)
  double fsdp_bytes = 0, fsdp_s = 0;      // weight all-gathers + gradient reduce-scatter in a group
  double dp_bytes = 0, dp_s = 0;          // gradient all-reduce over the replicas
  std::vector<TransportEstimate> transports;
  // Each transport's whole-run time and GPU-hours for `steps` steps.
  void set_steps(int64_t steps);
  nlohmann::json to_json() const;
};

// marin::Error naming the option for a layout that does not divide (experts, GPUs, batch).
ClusterPlan plan_cluster(const ModelConfig& c, const ClusterHardware& hw, const ClusterOptions& o);

}  // namespace marin
