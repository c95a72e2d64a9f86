#pragma once
// Routed experts: this process's E_loc SwiGLU FFNs in latent space (all E without expert
// parallelism), run as a grouped GEMM over variable row counts: the dispatched rows come in
// blocks, block b holding rows for local expert b mod E_loc from source b div E_loc (one source
// in one process; the sending ranks of the expert-parallel group under an all-to-all), and each
// block is one GEMM. A block's weight gradient goes to its source's gradient set, so the
// gradient of each micro-batch stays a separate partial (parallel::ExactSum sums them exactly).
#include <vector>

#include "core/buffer.hpp"
#include "model/config.hpp"
#include "model/weights.hpp"

namespace marin {

// Where one source's weight gradients of the local experts go: [E_loc, ...] each.
template <class T>
struct ExpertGrads {
  T *wg = nullptr, *wu = nullptr, *wd = nullptr;
};

template <class T>
class GroupedExperts {
 public:
  GroupedExperts() = default;
  // max_rows: the most dispatched rows one forward can bring (all sources together).
  // grads: one set per source (empty: the bound gradients, one source).
  GroupedExperts(const Binder<T>& bind, const ModelConfig& c, int64_t layer, i64 max_rows,
                 std::vector<ExpertGrads<T>> grads = {});
  // Block b computes rows offsets[b] .. offsets[b+1] of xg [rows, ℓ]; writes y: [rows, ℓ]. Only
  // blocks [first, last) (the rows that have arrived, ExpertRows): a forward is one or more
  // calls over disjoint ranges that cover the blocks, and so is a backward.
  void forward(const int64_t* offsets, i64 blocks, const T* xg, T* y, i64 first, i64 last);
  // dy: [rows, ℓ] → dxg (overwritten). scratch: 3·rows·expert_dim.
  void backward(const int64_t* offsets, const T* dy, T* dxg, T* scratch, i64 first, i64 last);
  i64 local_experts() const { return E_; }

 private:
  SwiGLUFFN<T> expert(i64 e, const ExpertGrads<T>& g) const;
  Weight<T> wg_, wu_, wd_;
  std::vector<ExpertGrads<T>> grads_;  // per source
  i64 l_ = 0, ed_ = 0, E_ = 0;
  const T* xg_ = nullptr;
  Buffer<T> a_, b_, h_;  // [max rows, expert_dim] saved activations
};

}  // namespace marin
