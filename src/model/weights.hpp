#pragma once
// Small shared pieces of the model: a weight bound to its gradient, the dense layer y = x @ W, and
// the SwiGLU feed-forward used by both the shared experts and each routed expert.
#include <cmath>
#include <string>

#include "kernels/kernels.hpp"
#include "model/params.hpp"

namespace marin {

using i64 = int64_t;

template <class T>
struct Weight {
  T* w = nullptr;  // value (inside the model's flat parameter buffer)
  T* g = nullptr;  // gradient (same offset in the flat gradient buffer)
};

// Looks tensors up by their formats.md name in the flat buffers.
template <class T>
struct Binder {
  const ParamTable& table;
  T* params;
  T* grads;  // null for a model that only runs forward (ModelUse::Inference)
  Weight<T> operator()(const std::string& name) const {
    const ParamInfo& p = table.at(name);
    return {params + p.offset, grads ? grads + p.offset : nullptr};
  }
  Weight<T> optional(const std::string& name) const {
    const ParamInfo* p = table.find(name);
    return p ? Weight<T>{params + p->offset, grads ? grads + p->offset : nullptr} : Weight<T>{};
  }
};

// y[rows,out] (+)= x[rows,in] @ W[in,out]. Precision::compute: in the run's compute dtype
// (--dtype; fp32 master weights either way); Precision::fp32 for the router's logits.
template <class T>
void linear_fwd(const T* x, const T* W, T* y, i64 rows, i64 in, i64 out, bool accumulate = false,
                kernels::Precision p = kernels::Precision::compute) {
  kernels::gemm<T>(false, false, rows, out, in, T(1), x, in, W, out, accumulate ? T(1) : T(0), y,
                   out, p);
}

// dW += x^T dy; dx (+)= dy W^T (skipped when dx is null); both products in the forward's
// precision.
template <class T>
void linear_bwd(const T* dy, const T* x, const T* W, T* dx, T* dW, i64 rows, i64 in, i64 out,
                bool accumulate_dx = false, kernels::Precision p = kernels::Precision::compute) {
  kernels::gemm<T>(true, false, in, out, rows, T(1), x, in, dy, out, T(1), dW, out, p);
  if (dx)
    kernels::gemm<T>(false, true, rows, in, out, T(1), dy, out, W, out, accumulate_dx ? T(1) : T(0),
                     dx, in, p);
}

template <class T>
inline T sigmoid(T z) {
  return T(1) / (T(1) + std::exp(-z));
}

// SwiGLU FFN: y (+)= (silu(x@Wg) ⊙ (x@Wu)) @ Wd, saving a = x@Wg, b = x@Wu, h for backward.
template <class T>
struct SwiGLUFFN {
  const T *Wg, *Wu, *Wd;
  T *dWg, *dWu, *dWd;
  i64 in, hidden;

  void forward(const T* x, i64 rows, T* a, T* b, T* h, T* y, bool accumulate_y) const {
    linear_fwd(x, Wg, a, rows, in, hidden);
    linear_fwd(x, Wu, b, rows, in, hidden);
    kernels::swiglu_fwd(a, b, h, rows * hidden);
    linear_fwd(h, Wd, y, rows, hidden, in, accumulate_y);
  }
  // scratch: 3·rows·hidden elements.
  void backward(const T* dy, const T* x, i64 rows, const T* a, const T* b, const T* h, T* dx,
                bool accumulate_dx, T* scratch) const {
    T* dh = scratch;
    T* da = dh + rows * hidden;
    T* db = da + rows * hidden;
    linear_bwd(dy, h, Wd, dh, dWd, rows, hidden, in);
    kernels::swiglu_bwd(dh, a, b, da, db, rows * hidden);
    linear_bwd(da, x, Wg, dx, dWg, rows, in, hidden, accumulate_dx);
    linear_bwd(db, x, Wu, dx, dWu, rows, in, hidden, true);
  }
};

}  // namespace marin
