// GatedNorm's element-wise kernels (see kernels/gates.hpp). Independent elements, so the
// threaded split cannot change a result.
#include "kernels/gates.hpp"

#include <cmath>

#include "kernels/cpu/simd.hpp"

namespace marin::kernels {

using cpu::sigmoid;

template <class T>
void silu_fwd(const T* u, T* su, i64 n) {
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMin)
  for (i64 i = 0; i < n; ++i) su[i] = u[i] * sigmoid(u[i]);
}

template <class T>
void silu_bwd(const T* dsu, const T* u, T* du, i64 n) {
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMin)
  for (i64 i = 0; i < n; ++i) {
    const T s = sigmoid(u[i]);
    du[i] = dsu[i] * (s * (T(1) + u[i] * (T(1) - s)));
  }
}

template <class T>
void sigmoid_gate_fwd(const T* r, T* g, T* out, i64 n) {
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMin)
  for (i64 i = 0; i < n; ++i) {
    g[i] = sigmoid(g[i]);
    out[i] = r[i] * g[i];
  }
}

template <class T>
void sigmoid_gate_bwd(const T* dout, const T* r, const T* g, T* dr, T* dg_logit, i64 n) {
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMin)
  for (i64 i = 0; i < n; ++i) {
    dr[i] = dout[i] * g[i];
    dg_logit[i] = dout[i] * r[i] * g[i] * (T(1) - g[i]);
  }
}

#define MARIN_GATE_KERNELS(T)                               \
  template void silu_fwd<T>(const T*, T*, i64);             \
  template void silu_bwd<T>(const T*, const T*, T*, i64);   \
  template void sigmoid_gate_fwd<T>(const T*, T*, T*, i64); \
  template void sigmoid_gate_bwd<T>(const T*, const T*, const T*, T*, T*, i64);
MARIN_GATE_KERNELS(float)
MARIN_GATE_KERNELS(double)
#undef MARIN_GATE_KERNELS

}  // namespace marin::kernels
