#include "optim/optimizer.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "kernels/threads.hpp"
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

// Contiguous runs of `region`, one per rank, with about equal cost; each run starts at the
// offset of its first tensor (padding belongs to the run before), the last ends at the region's
// end.
std::vector<parallel::Range> split_by_cost(const ParamTable& t, const OptimConfig& cfg,
                                           parallel::Range region, int n) {
  auto inside = [&](const ParamInfo& p) {
    return p.offset >= region.begin && p.offset < region.end;
  };
  double total = 0;
  // seam: the optimizer cost model that splits tensors over ranks (a few scalars per tensor)
  for (auto& p : t.params())
    if (inside(p)) total += update_cost(p, cfg);
  std::vector<int64_t> starts(static_cast<size_t>(n) + 1, region.end);
  starts[0] = region.begin;
  double acc = 0;
  int r = 1;
  // seam: the same cost model
  for (auto& p : t.params()) {
    if (!inside(p)) continue;
    // Tensor p starts a new run when the cost before it has reached that run's share.
    while (r < n && acc >= total * double(r) / double(n)) starts[size_t(r++)] = p.offset;
    acc += update_cost(p, cfg);
  }
  std::vector<parallel::Range> out;
  for (size_t q = 0; q < size_t(n); ++q)
    out.push_back({starts[q], std::max(starts[q], starts[q + 1])});
  return out;
}

}  // namespace

// The layer radius of a routed-expert stack split over the expert-parallel group: every rank's
// per-matrix sums are all-gathered (rank j holds matrices j·n … (j+1)·n − 1) and added in matrix
// order, as one process holding the whole stack adds them.
struct Optimizer::ExpertStackSum final : optim::StackSum {
  explicit ExpertStackSum(parallel::Comm& c) : ep(c) {}
  double total(const double* per_matrix, i64 n) const override {
    std::vector<double> all(size_t(n) * size_t(ep.size()));
    ep.allgather(per_matrix, n, all.data());
    return std::accumulate(all.begin(), all.end(), 0.0);  // in matrix order
  }
  parallel::Comm& ep;
};

Optimizer::Optimizer(const ParamTable& table, const OptimConfig& cfg, parallel::Comm* group)
    : Optimizer(table, cfg, {ParamRegion{{0, table.total()}, group}}, nullptr) {}

Optimizer::Optimizer(const ParamTable& table, const OptimConfig& cfg,
                     std::vector<ParamRegion> regions, parallel::Comm* experts)
    : table_(table), cfg_(cfg) {
  if (cfg.kind != "muonh" && cfg.kind != "adamw")
    fail("unknown optimizer '{}' (expected muonh or adamw)", cfg.kind);
  int64_t covered = 0, state = 0;
  // seam: region offsets and state sizes (integers)
  for (ParamRegion& w : regions) {
    MARIN_CHECK(w.range.begin == covered, "optimizer: regions must tile the table in order");
    covered = w.range.end;
    if (w.group && w.group->size() == 1) w.group = nullptr;
    Region r;
    r.where = w;
    r.rank = w.group ? w.group->rank() : 0;
    r.shards = split_by_cost(table, cfg, w.range, w.group ? w.group->size() : 1);
    for (auto& sh : r.shards) r.counts.push_back(sh.size()), r.displs.push_back(sh.begin);
    r.state_at = state;
    state += r.own().size();
    regions_.push_back(std::move(r));
  }
  MARIN_CHECK(covered == table.total(), "optimizer: regions cover {} of {} elements", covered,
              table.total());
  if (experts && experts->size() > 1) stack_sum_ = std::make_unique<ExpertStackSum>(*experts);
  m_.resize(size_t(state));
  v_.resize(size_t(state));
  work_.resize(size_t(workspace_size()));
}

// A MuonH tensor that is one small matrix of this process (not a routed-expert stack, whose radius
// may be summed over the expert-parallel group): updated as a task beside the others (step()).
// A larger one keeps every thread for its own products, which scale inside a GEMM, and needs no
// workspace a thread: a task's is about four times its matrix (≤ 4 MB here).
constexpr int64_t kTaskMatrixMax = 512 * 512;
bool Optimizer::updated_as_task(const ParamInfo& p) const {
  return cfg_.kind == "muonh" && p.group == OptGroup::MuonH && p.num_mats == 1 &&
         !p.routed_expert && p.size <= kTaskMatrixMax;
}

// The largest workspace of this rank's updates: of a stack's Newton–Schulz (one workspace per
// task slot) or of the single matrices' tasks (one whole MuonH workspace per slot). Both grow
// with the compute threads, so step() checks it again.
int64_t Optimizer::workspace_size() const {
  i64 work = 1, task_work = 0, tasks = 0;
  for (auto& p : table_.params()) {
    if (!owns(p.offset)) continue;
    if (updated_as_task(p)) {
      task_work = std::max(task_work, muonh_workspace_size(1, p.rows(), p.cols()));
      ++tasks;
    } else if (p.group == OptGroup::MuonH) {
      work = std::max(work, muonh_workspace_size(p.num_mats, p.rows(), p.cols()));
    }
    if (p.group == OptGroup::AdamH) work = std::max(work, adamh_workspace_size(p.size));
  }
  return std::max(work, kernels::task_slots(tasks) * task_work);
}

Optimizer::~Optimizer() = default;

const Optimizer::Region* Optimizer::region_of(int64_t offset) const {
  for (const Region& r : regions_)
    if (offset >= r.own().begin && offset < r.own().end) return &r;
  return nullptr;
}

bool Optimizer::owns(int64_t offset) const {
  return region_of(offset) != nullptr;
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

// This rank's m (or v) of tensor p, whose region r this rank updates.
float* Optimizer::state_of(const ParamInfo& p, const Region& r, Buffer<float>& m_or_v) {
  return m_or_v.data() + r.state_at + (p.offset - r.own().begin);
}

void Optimizer::step(float* params, const float* grads, int64_t step) {
  const LearningRates lr = rates(step);
  const AdamParams hp{cfg_.beta1, cfg_.beta2, cfg_.eps};
  const i64 t = step + 1;
  if (const int64_t need = workspace_size(); need > int64_t(work_.size()))
    work_.resize(size_t(need));
  std::vector<const ParamInfo*> matrices;  // updated as tasks, after the loop
  for (auto& p : table_.params()) {
    const Region* r = region_of(p.offset);
    if (!r) continue;                          // another rank's tensor
    if (p.group == OptGroup::State) continue;  // QB bias: set by balancing, never trained
    if (updated_as_task(p)) {
      matrices.push_back(&p);
      continue;
    }
    float* P = params + p.offset;
    const float* G = grads + p.offset;
    float* M = state_of(p, *r, m_);
    float* V = state_of(p, *r, v_);
    if (cfg_.kind == "adamw") {
      adamw_update(P, G, M, V, p.size, lr.adam, hp, t, cfg_.adamw_wd);
      continue;
    }
    switch (p.group) {
      case OptGroup::MuonH: {  // a routed-expert stack or a large matrix
        const RadiusScope scope = p.routed_expert ? cfg_.expert_radius : RadiusScope::kLayer;
        const optim::StackSum* split = p.routed_expert ? stack_sum_.get() : nullptr;
        muonh_update(P, G, M, p.num_mats, p.rows(), p.cols(), lr.muonh, scope, work_.data(),
                     optim::kMuonBeta, split, cfg_.ns_products());
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
  update_matrices(std::move(matrices), params, grads, lr.muonh);
  const Timer timer;
  for (const Region& r : regions_) {
    if (!r.where.group || !r.where.gather) continue;
    r.where.group->allgatherv(params + r.own().begin, r.own().size(), params, r.counts.data(),
                              r.displs.data());
  }
  gather_seconds_ = timer.seconds();
}

// The small single-matrix MuonH tensors (attention, latent, shared experts, GatedNorm), one per
// thread at a time: their Newton–Schulz products are too small to scale inside one GEMM (on the Zen
// 5 a 256×256 one ran 1.3× faster on two threads, a 256×32 one 5× slower). A task runs its kernels
// on one thread (kernels::parallel_tasks); the costliest start first, so the threads end together.
void Optimizer::update_matrices(std::vector<const ParamInfo*> matrices, float* params,
                                const float* grads, double lr) {
  std::stable_sort(matrices.begin(), matrices.end(), [&](const ParamInfo* a, const ParamInfo* b) {
    return update_cost(*a, cfg_) > update_cost(*b, cfg_);
  });
  i64 ws = 0;
  for (const ParamInfo* p : matrices)
    ws = std::max(ws, muonh_workspace_size(1, p->rows(), p->cols()));
  kernels::parallel_tasks(i64(matrices.size()), [&](i64 i, int slot) {
    const ParamInfo& p = *matrices[size_t(i)];
    muonh_update(params + p.offset, grads + p.offset, state_of(p, *region_of(p.offset), m_), 1,
                 p.rows(), p.cols(), lr, RadiusScope::kLayer, work_.data() + slot * ws,
                 optim::kMuonBeta, nullptr, cfg_.ns_products());
  });
}

void Optimizer::gather_state(Buffer<float>& m, Buffer<float>& v) const {
  bool root_of_any = false;
  for (const Region& r : regions_) root_of_any |= r.rank == 0;
  m.resize(root_of_any ? size_t(table_.total()) : 0);
  v.resize(root_of_any ? size_t(table_.total()) : 0);
  m.zero(), v.zero();
  for (const Region& r : regions_) {
    const float* mine_m = m_.data() + r.state_at;
    const float* mine_v = v_.data() + r.state_at;
    if (!r.where.group) {
      std::copy(mine_m, mine_m + r.own().size(), m.data() + r.own().begin);
      std::copy(mine_v, mine_v + r.own().size(), v.data() + r.own().begin);
      continue;
    }
    float* to_m = r.rank == 0 ? m.data() : nullptr;
    float* to_v = r.rank == 0 ? v.data() : nullptr;
    r.where.group->gatherv(mine_m, r.own().size(), to_m, r.counts.data(), r.displs.data());
    r.where.group->gatherv(mine_v, r.own().size(), to_v, r.counts.data(), r.displs.data());
  }
}

void Optimizer::load_state(const float* m, const float* v) {
  for (const Region& r : regions_) {
    std::copy(m + r.own().begin, m + r.own().end, m_.data() + r.state_at);
    std::copy(v + r.own().begin, v + r.own().end, v_.data() + r.state_at);
  }
}

}  // namespace marin
