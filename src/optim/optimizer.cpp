#include "optim/optimizer.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "optim/schedule.hpp"

namespace marin {

using namespace optim;

Optimizer::Optimizer(const ParamTable& table, const OptimConfig& cfg)
    : table_(table), cfg_(cfg), m_(table.total()), v_(table.total()) {
  if (cfg.kind != "muonh" && cfg.kind != "adamw")
    fail("unknown optimizer '{}' (expected muonh or adamw)", cfg.kind);
  i64 work = 1;
  for (auto& p : table.params()) {
    if (p.group == OptGroup::MuonH)
      work = std::max(work, muonh_workspace_size(p.num_mats, p.rows(), p.cols()));
    if (p.group == OptGroup::AdamH) work = std::max(work, adamh_workspace_size(p.size));
  }
  work_.resize(work);
}

LearningRates Optimizer::rates(int64_t step) const {
  LearningRates r;
  r.muonh = lr_at(cfg_.muonh_lr, step, cfg_.total_steps);
  r.adam = lr_at(cfg_.adam_lr, step, cfg_.total_steps);
  r.wd = cfg_.gate_router_wd ? weight_decay_at(step, cfg_.total_steps) : 0.0;
  return r;
}

static bool is_gate_or_router(const std::string& name) {
  auto ends = [&](const char* s) {
    const std::string suf(s);
    return name.size() >= suf.size() &&
           name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
  };
  return ends(".attn.gate") || ends(".moe.router");
}

void Optimizer::step(float* params, const float* grads, int64_t step) {
  const LearningRates lr = rates(step);
  const AdamParams hp{cfg_.beta1, cfg_.beta2, cfg_.eps};
  const i64 t = step + 1;
  for (auto& p : table_.params()) {
    float* P = params + p.offset;
    const float* G = grads + p.offset;
    float* M = m_.data() + p.offset;
    float* V = v_.data() + p.offset;
    if (p.group == OptGroup::State) continue;  // QB bias: set by balancing, never trained
    if (cfg_.kind == "adamw") {
      adamw_update(P, G, M, V, p.size, lr.adam, hp, t, cfg_.adamw_wd);
      continue;
    }
    switch (p.group) {
      case OptGroup::MuonH: {
        const RadiusScope scope = p.num_mats > 1 ? cfg_.expert_radius : RadiusScope::kLayer;
        muonh_update(P, G, M, p.num_mats, p.rows(), p.cols(), lr.muonh, scope, work_.data());
        break;
      }
      case OptGroup::AdamH:
        adamh_update(P, G, M, V, p.size, lr.muonh, hp, t, work_.data());
        break;
      case OptGroup::Adam:
        adam_update(P, G, M, V, p.size, lr.adam, hp, t, is_gate_or_router(p.name) ? lr.wd : 0.0);
        break;
      case OptGroup::State:
        break;
    }
  }
}

}  // namespace marin
