// RMSNorm forward/backward. Rows are independent (parallel over rows); the gain gradient is a
// column reduction, done in a second pass parallel over column chunks so the summation order
// (and hence the result) does not depend on the number of threads.
//
// The loops are plain C++ that the compiler vectorises; the file is compiled once per Highway
// target (hwy/foreach_target.h) so the float path runs with the widest vectors of the machine at
// hand, chosen at start-up. double runs the baseline target's copy, the exact generic path.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/norm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {
namespace {

template <class T>
void rmsnorm_fwd_t(const T* x, const T* g, T* y, T* rstd, i64 rows, i64 dim, double eps) {
  const bool par = rows * dim >= cpu::kParallelMin;
  cpu::parallel_for(rows, par, [&](i64 r) {
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
  });
}

// y_i = x_i r g_i, r = (mean x^2 + eps)^(-1/2), dr/dx_i = -r^3 x_i / dim
// dx_i = r g_i dy_i - x_i r^3 / dim * sum_j dy_j g_j x_j;  dg_i += dy_i x_i r.
template <class T>
void rmsnorm_bwd_t(const T* dy, const T* x, const T* g, const T* rstd, T* dx, T* dg, i64 rows,
                   i64 dim) {
  const bool par = rows * dim >= cpu::kParallelMin;
  cpu::parallel_for(rows, par, [&](i64 r) {
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
  });
  if (!g || !dg) return;
  constexpr i64 kChunk = 64;
  const i64 nchunks = (dim + kChunk - 1) / kChunk;
  cpu::parallel_for(nchunks, par, [&](i64 cb) {
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
  });
}

}  // namespace

void RmsnormFwdF32(const float* x, const float* g, float* y, float* rstd, i64 rows, i64 dim,
                   double eps) {
  rmsnorm_fwd_t(x, g, y, rstd, rows, dim, eps);
}
void RmsnormFwdF64(const double* x, const double* g, double* y, double* rstd, i64 rows, i64 dim,
                   double eps) {
  rmsnorm_fwd_t(x, g, y, rstd, rows, dim, eps);
}
void RmsnormBwdF32(const float* dy, const float* x, const float* g, const float* rstd, float* dx,
                   float* dg, i64 rows, i64 dim) {
  rmsnorm_bwd_t(dy, x, g, rstd, dx, dg, rows, dim);
}
void RmsnormBwdF64(const double* dy, const double* x, const double* g, const double* rstd,
                   double* dx, double* dg, i64 rows, i64 dim) {
  rmsnorm_bwd_t(dy, x, g, rstd, dx, dg, rows, dim);
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(RmsnormFwdF32);
HWY_EXPORT(RmsnormBwdF32);
}  // namespace cpu

template <>
void rmsnorm_fwd<float>(const float* x, const float* g, float* y, float* rstd, i64 rows, i64 dim,
                        double eps) {
  HWY_DYNAMIC_DISPATCH(cpu::RmsnormFwdF32)(x, g, y, rstd, rows, dim, eps);
}
template <>
void rmsnorm_fwd<double>(const double* x, const double* g, double* y, double* rstd, i64 rows,
                         i64 dim, double eps) {
  cpu::HWY_STATIC_DISPATCH(RmsnormFwdF64)(x, g, y, rstd, rows, dim, eps);
}
template <>
void rmsnorm_bwd<float>(const float* dy, const float* x, const float* g, const float* rstd,
                        float* dx, float* dg, i64 rows, i64 dim) {
  HWY_DYNAMIC_DISPATCH(cpu::RmsnormBwdF32)(dy, x, g, rstd, dx, dg, rows, dim);
}
template <>
void rmsnorm_bwd<double>(const double* dy, const double* x, const double* g, const double* rstd,
                         double* dx, double* dg, i64 rows, i64 dim) {
  cpu::HWY_STATIC_DISPATCH(RmsnormBwdF64)(dy, x, g, rstd, dx, dg, rows, dim);
}

}  // namespace marin::kernels
#endif  // HWY_ONCE
