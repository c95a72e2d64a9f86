#pragma once
// Adam and AdamW (recipe §5) as free functions over raw arrays. State (M, V) is plain arrays owned
// by the caller, zero at the start; `step` is the 1-based count of updates (bias correction).
#include <cstdint>

namespace marin::optim {

using i64 = int64_t;

struct AdamParams {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;  m̂ = m/(1−β1^t);  v̂ = v/(1−β2^t);
// u = m̂/(√v̂ + ε) + wd·P;  P ← P − lr·u.   (wd = 0: plain Adam; the recipe's optional decay on the
// head gate and router puts wd(t) here.)
template <class T>
void adam_update(T* P, const T* G, T* M, T* V, i64 n, double lr, const AdamParams& hp, i64 step,
                 double wd = 0.0);

// AdamW baseline: P ← P − lr·wd·P − lr·m̂/(√v̂ + ε) (decoupled decay, as torch.optim.AdamW and
// optax.adamw). This is the same arithmetic as adam_update with wd inside u; kept as its own name
// so call sites say which optimizer they mean.
template <class T>
void adamw_update(T* P, const T* G, T* M, T* V, i64 n, double lr, const AdamParams& hp, i64 step,
                  double wd);

// Writes the bias-corrected direction u = m̂/(√v̂ + ε) into U after updating m and v (shared by
// Adam and AdamH). U may not alias P, G, M or V.
template <class T>
void adam_direction(const T* G, T* M, T* V, T* U, i64 n, const AdamParams& hp, i64 step);

}  // namespace marin::optim
