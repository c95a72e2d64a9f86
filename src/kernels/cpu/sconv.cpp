// Depthwise causal convolution with document-aware taps: a tap that reaches back into another
// segment (or before the row start) contributes nothing. Rows (b, t) are independent for y and
// dx; the weight gradient is a reduction over tokens, done parallel over channel chunks so the
// summation order does not depend on the thread count.
#include <algorithm>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

namespace marin::kernels {

template <class T>
void sconv_fwd(const T* x, const T* w, const int32_t* seg, T* y, int B, int S, int C, int k) {
  const i64 rows = i64(B) * S;
#pragma omp parallel for schedule(static) if (rows * C >= cpu::kParallelMin)
  for (i64 bt = 0; bt < rows; ++bt) {
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
  }
}

// dx[t] = sum_j w_j dy[t+j] over taps where token t+j reads token t;
// dw[j] += sum_t dy[t] x[t-j] over the same taps.
template <class T>
void sconv_bwd(const T* dy, const T* x, const T* w, const int32_t* seg, T* dx, T* dw, int B, int S,
               int C, int k) {
  const i64 rows = i64(B) * S;
  const bool par = rows * C >= cpu::kParallelMin;
#pragma omp parallel for schedule(static) if (par)
  for (i64 bt = 0; bt < rows; ++bt) {
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
  }
  if (!dw) return;
  constexpr int kChunk = 64;
  const int nchunks = (C + kChunk - 1) / kChunk;
  const i64 items = i64(nchunks) * k;
#pragma omp parallel for schedule(static) if (par)
  for (i64 it = 0; it < items; ++it) {
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
  }
}

#define MARIN_INST(T)                                                                             \
  template void sconv_fwd<T>(const T*, const T*, const int32_t*, T*, int, int, int, int);         \
  template void sconv_bwd<T>(const T*, const T*, const T*, const int32_t*, T*, T*, int, int, int, \
                             int);
MARIN_INST(float)
MARIN_INST(double)
#undef MARIN_INST

}  // namespace marin::kernels
