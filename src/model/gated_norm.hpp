#pragma once
// RMS_g followed by GatedNorm (recipe §2): out = r ⊙ σ(silu(r @ Wd) @ Wu), r = RMS_g(x).
// Used after the embedding, before attention and the MoE of every block, and before the head.
#include "core/arena.hpp"
#include "core/buffer.hpp"
#include "model/weights.hpp"

namespace marin {

template <class T>
class GatedRMSNorm {
 public:
  GatedRMSNorm() = default;
  // `norm` names the gain ("layers.0.attn_norm"), `gnorm` the gate ("layers.0.attn_gnorm").
  GatedRMSNorm(const Binder<T>& bind, const std::string& norm, const std::string& gnorm, i64 dim,
               i64 rank, i64 max_rows);
  // x must stay alive until backward (it is the caller's saved activation).
  void forward(const T* x, T* out, i64 rows);
  // dx overwritten.
  void backward(const T* dout, T* dx, i64 rows, Arena<T>& arena);
  static i64 scratch(i64 dim, i64 rank, i64 rows) { return 2 * rows * dim + rows * rank + 64; }

 private:
  Weight<T> gain_, down_, up_;
  i64 dim_ = 0, rank_ = 0;
  const T* x_ = nullptr;
  Buffer<T> rstd_, r_, u_, su_, gate_;
};

}  // namespace marin
