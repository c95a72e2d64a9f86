#pragma once
// Routed experts: E SwiGLU FFNs in latent space, run as a grouped GEMM over variable row counts
// (one GEMM per expert over its contiguous block of dispatched rows).
#include "core/buffer.hpp"
#include "model/config.hpp"
#include "model/weights.hpp"

namespace marin {

template <class T>
class GroupedExperts {
 public:
  GroupedExperts() = default;
  GroupedExperts(const Binder<T>& bind, const ModelConfig& c, int64_t layer, i64 max_rows);
  // Expert e computes rows offsets[e] .. offsets[e+1] of xg [rows, ℓ]; writes y: [rows, ℓ].
  void forward(const int64_t* offsets, const T* xg, T* y);
  // dy: [rows, ℓ] → dxg (overwritten). scratch: 3·rows·expert_dim.
  void backward(const int64_t* offsets, const T* dy, T* dxg, T* scratch);

 private:
  SwiGLUFFN<T> expert(i64 e) const;
  Weight<T> wg_, wu_, wd_;
  i64 l_ = 0, ed_ = 0, E_ = 0;
  const T* xg_ = nullptr;
  Buffer<T> a_, b_, h_;  // [rows·K, expert_dim] saved activations
};

}  // namespace marin
