#pragma once
// The optimizer of a whole model (recipe §5): walks the parameter table and applies MuonH, AdamH
// or Adam to each tensor by its group, with the warmup/linear-decay schedule on both learning
// rates. `adamw` mode is the ablation baseline: AdamW on every trained tensor. All state lives in
// two flat buffers with the parameter layout, so checkpoints store them as they are.
#include <string>

#include "core/buffer.hpp"
#include "model/params.hpp"
#include "optim/adam.hpp"
#include "optim/muonh.hpp"

namespace marin {

struct OptimConfig {
  std::string kind = "muonh";        // "muonh" (the recipe) or "adamw" (baseline)
  double muonh_lr = 0, adam_lr = 0;  // peak learning rates
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  optim::RadiusScope expert_radius = optim::RadiusScope::kLayer;
  bool gate_router_wd =
      false;                // the hero's optional decay on head gate + router (from step 58,014)
  double adamw_wd = 0.1;    // decoupled decay of the adamw baseline
  int64_t total_steps = 1;  // schedule horizon N
};

struct LearningRates {
  double muonh = 0, adam = 0, wd = 0;
};

class Optimizer {
 public:
  Optimizer(const ParamTable& table, const OptimConfig& cfg);
  const OptimConfig& config() const { return cfg_; }
  void set_config(const OptimConfig& cfg) { cfg_ = cfg; }  // e.g. a fork that changes the horizon
  LearningRates rates(int64_t step) const;
  // One update at 0-based `step` (Adam bias correction counts it as step + 1).
  void step(float* params, const float* grads, int64_t step);
  Buffer<float>& m() { return m_; }
  Buffer<float>& v() { return v_; }

 private:
  const ParamTable& table_;
  OptimConfig cfg_;
  Buffer<float> m_, v_, work_;
};

}  // namespace marin
