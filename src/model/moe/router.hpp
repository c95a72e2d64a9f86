#pragma once
// Router (recipe §2 MoE steps 1–3): fp32 logits s = X @ Wr, top-(K+1) selection on s + b with the
// stop-gradient QB bias b, and sigmoid combine weights on the unbiased logits rescaled to
// combine_sum. The bias is state (updated by QB balancing), never trained.
#include "core/arena.hpp"
#include "core/buffer.hpp"
#include "model/config.hpp"
#include "model/weights.hpp"

namespace marin::kernels {
struct RouterShape;  // kernels/moe.hpp
}  // namespace marin::kernels

namespace marin {

// What the router decided for one batch; the dispatcher, the QB estimator and the health metrics
// all read it.
template <class T>
struct Routing {
  i64 rows = 0, E = 0, K = 0;
  Buffer<T> logits;        // [rows, E] unbiased s
  Buffer<int32_t> expert;  // [rows, K] selected experts e_k
  Buffer<T> alpha;         // [rows] the (K+1)-th biased value α_t
  Buffer<T> prob;          // [rows, K] σ(s_{e_k})
  Buffer<T> weight;        // [rows, K] combine weights w_k
  Buffer<T> prob_sum;      // [rows] Σ_k σ + 1e-9
};

template <class T>
class Router {
 public:
  Router() = default;
  Router(const Binder<T>& bind, const ModelConfig& c, int64_t layer, i64 max_rows);
  void forward(const T* x, i64 rows);
  // dweight: [rows, K] gradient of the combine weights. Accumulates into dx.
  void backward(const T* dweight, const T* x, T* dx, Arena<T>& arena);
  const Routing<T>& routing() const { return r_; }
  T* bias() { return bias_.w; }
  const T* bias() const { return bias_.w; }

 private:
  kernels::RouterShape shape(i64 rows) const;
  Weight<T> w_, bias_;
  i64 d_ = 0;
  double combine_sum_ = 2.5;
  Routing<T> r_;
};

}  // namespace marin
