// Depthwise causal convolution with document-aware taps: a tap that reaches back into another
// segment (or before the row start) contributes nothing. Rows (b, t) are independent for y and
// dx; the weight gradient is a reduction over tokens, done parallel over channel chunks so the
// summation order does not depend on the thread count.
//
// Plain loops that the compiler vectorises, compiled once per Highway target
// (hwy/foreach_target.h) so the float path runs with the machine's widest vectors, chosen at
// start-up; double runs the baseline target's copy, the exact generic path.
#include <algorithm>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/sconv.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {
namespace {

template <class T>
void sconv_fwd_t(const T* x, const T* w, const int32_t* seg, T* y, int B, int S, int C, int k) {
  const i64 rows = i64(B) * S;
  cpu::parallel_for(rows, rows * C >= cpu::kParallelMin, [&](i64 bt) {
    const i64 t = bt % S;
    T* yr = y + bt * C;
    const T* xr = x + bt * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) yr[c] = w[c] * xr[c];
    for (int j = 1; j < k && j <= t; ++j) {
      if (seg[bt - j] != seg[bt]) continue;
      const T* xs = x + (bt - j) * C;
      const T* wj = w + i64(j) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) yr[c] += wj[c] * xs[c];
    }
  });
}

// dx[t] = sum_j w_j dy[t+j] over taps where token t+j reads token t;
// dw[j] += sum_t dy[t] x[t-j] over the same taps.
template <class T>
void sconv_bwd_t(const T* dy, const T* x, const T* w, const int32_t* seg, T* dx, T* dw, int B,
                 int S, int C, int k) {
  const i64 rows = i64(B) * S;
  const bool par = rows * C >= cpu::kParallelMin;
  cpu::parallel_for(rows, par, [&](i64 bt) {
    const i64 t = bt % S;
    T* dxr = dx + bt * C;
    const T* dyr = dy + bt * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) dxr[c] = w[c] * dyr[c];
    for (int j = 1; j < k && t + j < S; ++j) {
      if (seg[bt + j] != seg[bt]) continue;
      const T* dys = dy + (bt + j) * C;
      const T* wj = w + i64(j) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) dxr[c] += wj[c] * dys[c];
    }
  });
  if (!dw) return;
  constexpr int kChunk = 64;
  const int nchunks = (C + kChunk - 1) / kChunk;
  const i64 items = i64(nchunks) * k;
  cpu::parallel_for(items, par, [&](i64 it) {
    const int j = int(it / nchunks), c0 = int(it % nchunks) * kChunk;
    const int c1 = std::min(C, c0 + kChunk);
    T acc[kChunk] = {};
    for (i64 bt = 0; bt < rows; ++bt) {
      const i64 t = bt % S;
      if (j > t || seg[bt - j] != seg[bt]) continue;
      const T* dyr = dy + bt * C;
      const T* xs = x + (bt - j) * C;
#pragma omp simd
      for (int c = c0; c < c1; ++c) acc[c - c0] += dyr[c] * xs[c];
    }
    T* dwj = dw + i64(j) * C;
    for (int c = c0; c < c1; ++c) dwj[c] += acc[c - c0];
  });
}

}  // namespace

#define MARIN_SCONV_ENTRY(T, SUF)                                                                  \
  void SconvFwd##SUF(const T* x, const T* w, const int32_t* seg, T* y, int B, int S, int C,        \
                     int k) {                                                                      \
    sconv_fwd_t(x, w, seg, y, B, S, C, k);                                                         \
  }                                                                                                \
  void SconvBwd##SUF(const T* dy, const T* x, const T* w, const int32_t* seg, T* dx, T* dw, int B, \
                     int S, int C, int k) {                                                        \
    sconv_bwd_t(dy, x, w, seg, dx, dw, B, S, C, k);                                                \
  }
MARIN_SCONV_ENTRY(float, F32)
MARIN_SCONV_ENTRY(double, F64)
#undef MARIN_SCONV_ENTRY

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(SconvFwdF32);
HWY_EXPORT(SconvBwdF32);
}  // namespace cpu

template <>
void sconv_fwd<float>(const float* x, const float* w, const int32_t* seg, float* y, int B, int S,
                      int C, int k) {
  HWY_DYNAMIC_DISPATCH(cpu::SconvFwdF32)(x, w, seg, y, B, S, C, k);
}
template <>
void sconv_fwd<double>(const double* x, const double* w, const int32_t* seg, double* y, int B,
                       int S, int C, int k) {
  cpu::HWY_STATIC_DISPATCH(SconvFwdF64)(x, w, seg, y, B, S, C, k);
}
template <>
void sconv_bwd<float>(const float* dy, const float* x, const float* w, const int32_t* seg,
                      float* dx, float* dw, int B, int S, int C, int k) {
  HWY_DYNAMIC_DISPATCH(cpu::SconvBwdF32)(dy, x, w, seg, dx, dw, B, S, C, k);
}
template <>
void sconv_bwd<double>(const double* dy, const double* x, const double* w, const int32_t* seg,
                       double* dx, double* dw, int B, int S, int C, int k) {
  cpu::HWY_STATIC_DISPATCH(SconvBwdF64)(dy, x, w, seg, dx, dw, B, S, C, k);
}

}  // namespace marin::kernels
#endif  // HWY_ONCE
