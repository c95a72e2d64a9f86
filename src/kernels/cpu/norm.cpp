// RMSNorm forward/backward. Rows are independent (parallel over rows); the gain gradient is a
// column reduction, done in a second pass parallel over column chunks so the summation order
// (and hence the result) does not depend on the number of threads.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

namespace marin::kernels {

template <class T>
void rmsnorm_fwd(const T* x, const T* g, T* y, T* rstd, i64 rows, i64 dim, double eps) {
  const bool par = rows * dim >= cpu::kParallelMin;
#pragma omp parallel for schedule(static) if (par)
  for (i64 r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    T* yr = y + r * dim;
    T ss = 0;
#pragma omp simd reduction(+ : ss)
    for (i64 i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const T rs = T(1) / std::sqrt(ss / T(dim) + T(eps));
    rstd[r] = rs;
    if (g) {
#pragma omp simd
      for (i64 i = 0; i < dim; ++i) yr[i] = xr[i] * rs * g[i];
    } else {
#pragma omp simd
      for (i64 i = 0; i < dim; ++i) yr[i] = xr[i] * rs;
    }
  }
}

// y_i = x_i r g_i, r = (mean x^2 + eps)^(-1/2), dr/dx_i = -r^3 x_i / dim
// dx_i = r g_i dy_i - x_i r^3 / dim * sum_j dy_j g_j x_j;  dg_i += dy_i x_i r.
template <class T>
void rmsnorm_bwd(const T* dy, const T* x, const T* g, const T* rstd, T* dx, T* dg, i64 rows,
                 i64 dim) {
  const bool par = rows * dim >= cpu::kParallelMin;
#pragma omp parallel for schedule(static) if (par)
  for (i64 r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    const T* dyr = dy + r * dim;
    T* dxr = dx + r * dim;
    const T rs = rstd[r];
    T dot = 0;
    if (g) {
#pragma omp simd reduction(+ : dot)
      for (i64 i = 0; i < dim; ++i) dot += dyr[i] * g[i] * xr[i];
      const T c = dot * rs * rs * rs / T(dim);
#pragma omp simd
      for (i64 i = 0; i < dim; ++i) dxr[i] = rs * g[i] * dyr[i] - c * xr[i];
    } else {
#pragma omp simd reduction(+ : dot)
      for (i64 i = 0; i < dim; ++i) dot += dyr[i] * xr[i];
      const T c = dot * rs * rs * rs / T(dim);
#pragma omp simd
      for (i64 i = 0; i < dim; ++i) dxr[i] = rs * dyr[i] - c * xr[i];
    }
  }
  if (!g || !dg) return;
  constexpr i64 kChunk = 64;
  const i64 nchunks = (dim + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (par)
  for (i64 cb = 0; cb < nchunks; ++cb) {
    const i64 c0 = cb * kChunk, c1 = std::min(dim, c0 + kChunk);
    T acc[kChunk] = {};
    for (i64 r = 0; r < rows; ++r) {
      const T* xr = x + r * dim;
      const T* dyr = dy + r * dim;
      const T rs = rstd[r];
#pragma omp simd
      for (i64 i = c0; i < c1; ++i) acc[i - c0] += dyr[i] * xr[i] * rs;
    }
    for (i64 i = c0; i < c1; ++i) dg[i] += acc[i - c0];
  }
}

#define MARIN_INST(T)                                                         \
  template void rmsnorm_fwd<T>(const T*, const T*, T*, T*, i64, i64, double); \
  template void rmsnorm_bwd<T>(const T*, const T*, const T*, const T*, T*, T*, i64, i64);
MARIN_INST(float)
MARIN_INST(double)
#undef MARIN_INST

}  // namespace marin::kernels
