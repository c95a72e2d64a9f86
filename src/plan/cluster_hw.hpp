#pragma once
// A cluster's hardware as the planner needs it (configs/cluster/*.toml): per-GPU dense bf16 peak,
// HBM, NVLink and inter-node bandwidth, and how GPUs group into NVLink domains and racks/nodes.
// Every figure is required; unknown fields are errors, so a typo cannot silently fall back to a
// default. Files store vendor units (TFLOP/s, GB, TB/s, GB/s); this struct holds SI base units.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

namespace marin {

struct ClusterHardware {
  std::string origin;  // the file, for messages
  std::string name;    // "GB200 NVL72"
  std::string unit;    // what --racks counts: "rack" or "node"
  int64_t gpus_per_unit = 0;
  int64_t nvlink_domain = 0;       // GPUs that share one NVLink switch domain
  double bf16_flops = 0;           // dense (no sparsity) bf16 tensor-core peak, FLOP/s per GPU
  double hbm_bytes = 0;            // per GPU
  double hbm_bytes_per_s = 0;      // per GPU
  double nvlink_bytes_per_s = 0;   // per GPU, each direction
  double network_bytes_per_s = 0;  // per GPU, each direction (InfiniBand / Ethernet NICs)
  // The planner's batch when none is given: this many sequences per GPU of the mesh (optional
  // field `defaults.sequences_per_gpu`, 1 when absent), so a plan runs without --batch.
  int64_t default_sequences_per_gpu = 1;

  // marin::Error naming the file and the field for a missing, unknown or out-of-range field.
  static ClusterHardware load(const std::string& path);
  static ClusterHardware from_toml_text(const std::string& text, const std::string& origin);
  nlohmann::json to_json() const;
};

}  // namespace marin
