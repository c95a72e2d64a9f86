#include "optim/optimizer.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "optim/schedule.hpp"

namespace marin {

using namespace optim;

namespace {

// Relative cost of one tensor's update: Newton–Schulz is 5 iterations of three GEMMs over a
// min×max matrix per matrix; the element-wise updates are a few passes over the tensor.
double update_cost(const ParamInfo& p, const OptimConfig& cfg) {
  if (p.group == OptGroup::State) return 0;
  if (cfg.kind == "muonh" && p.group == OptGroup::MuonH) {
    const double r = double(p.rows()), c = double(p.cols());
    return double(p.num_mats) * 30.0 * r * c * std::min(r, c);
  }
  return 10.0 * double(p.size);
}

// Contiguous runs of the table, one per rank, with about equal cost; each run starts at the
// offset of its first tensor (padding belongs to the run before), the last ends at total().
std::vector<dist::Range> split_by_cost(const ParamTable& t, const OptimConfig& cfg, int n) {
  const auto& ps = t.params();
  double total = 0;
  for (auto& p : ps) total += update_cost(p, cfg);
  std::vector<int64_t> starts(static_cast<size_t>(n) + 1, t.total());
  starts[0] = 0;
  double acc = 0;
  int r = 1;
  for (auto& p : ps) {
    // Tensor p starts a new run when the cost before it has reached that run's share.
    while (r < n && acc >= total * double(r) / double(n)) starts[size_t(r++)] = p.offset;
    acc += update_cost(p, cfg);
  }
  std::vector<dist::Range> out;
  for (size_t q = 0; q < size_t(n); ++q)
    out.push_back({starts[q], std::max(starts[q], starts[q + 1])});
  return out;
}

}  // namespace

Optimizer::Optimizer(const ParamTable& table, const OptimConfig& cfg, dist::Comm* group)
    : table_(table), cfg_(cfg), group_(group && group->size() > 1 ? group : nullptr) {
  if (cfg.kind != "muonh" && cfg.kind != "adamw")
    fail("unknown optimizer '{}' (expected muonh or adamw)", cfg.kind);
  shards_ = split_by_cost(table, cfg, group_ ? group_->size() : 1);
  const dist::Range own = shard();
  m_.resize(own.size());
  v_.resize(own.size());
  i64 work = 1;
  for (auto& p : table.params()) {
    if (p.offset < own.begin || p.offset >= own.end) continue;
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
  const dist::Range own = shard();
  for (auto& p : table_.params()) {
    if (p.offset < own.begin || p.offset >= own.end) continue;  // another rank's tensor
    float* P = params + p.offset;
    const float* G = grads + p.offset;
    float* M = m_.data() + (p.offset - own.begin);
    float* V = v_.data() + (p.offset - own.begin);
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
  if (group_) {
    const Timer t;
    std::vector<int64_t> counts, displs;
    for (auto& r : shards_) counts.push_back(r.size()), displs.push_back(r.begin);
    group_->allgatherv(params + own.begin, own.size(), params, counts.data(), displs.data());
    gather_seconds_ = t.seconds();
  }
}

void Optimizer::gather_state(Buffer<float>& m, Buffer<float>& v) const {
  const dist::Range own = shard();
  if (!group_) {
    m.resize(m_.size()), v.resize(v_.size());
    std::copy(m_.data(), m_.data() + m_.size(), m.data());
    std::copy(v_.data(), v_.data() + v_.size(), v.data());
    return;
  }
  std::vector<int64_t> counts, displs;
  for (auto& r : shards_) counts.push_back(r.size()), displs.push_back(r.begin);
  const bool root = group_->is_root();
  m.resize(root ? size_t(table_.total()) : 0);
  v.resize(root ? size_t(table_.total()) : 0);
  if (root) m.zero(), v.zero();
  group_->gatherv(m_.data(), own.size(), m.data(), counts.data(), displs.data());
  group_->gatherv(v_.data(), own.size(), v.data(), counts.data(), displs.data());
}

void Optimizer::load_state(const float* m, const float* v) {
  const dist::Range own = shard();
  std::copy(m + own.begin, m + own.end, m_.data());
  std::copy(v + own.begin, v + own.end, v_.data());
}

}  // namespace marin
