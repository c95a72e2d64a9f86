// Softmax cross-entropy with z-loss over rows of logits. Float path: AVX-512 max / exp-sum.
// A negative label marks an ignored row: ce = 0 and no one-hot term in the gradient (lse and
// the z-loss term are still produced).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

namespace marin::kernels {

namespace {

template <class T>
T row_lse(const T* x, i64 V) {
  T m = -std::numeric_limits<T>::infinity();
  for (i64 i = 0; i < V; ++i) m = std::max(m, x[i]);
  T s = 0;
  for (i64 i = 0; i < V; ++i) s += std::exp(x[i] - m);
  return m + std::log(s);
}

// dl[i] = exp(x[i] - lse) * c; may alias.
template <class T>
void row_scaled_softmax(const T* x, T* dl, i64 V, T lse, T c) {
  for (i64 i = 0; i < V; ++i) dl[i] = std::exp(x[i] - lse) * c;
}

#ifdef __AVX512F__
template <>
float row_lse<float>(const float* x, i64 V) {
  __m512 mv = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (i64 i = 0; i < V; i += 16)
    mv = _mm512_mask_max_ps(mv, cpu::tail_mask(V - i), mv,
                            _mm512_maskz_loadu_ps(cpu::tail_mask(V - i), x + i));
  const float m = _mm512_reduce_max_ps(mv);
  const __m512 mb = _mm512_set1_ps(m);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  i64 i = 0;
  for (; i + 32 <= V; i += 32) {
    s0 = _mm512_add_ps(s0, cpu::exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), mb)));
    s1 = _mm512_add_ps(s1, cpu::exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), mb)));
  }
  for (; i < V; i += 16) {
    const __mmask16 k = cpu::tail_mask(V - i);
    s0 = _mm512_mask_add_ps(s0, k, s0,
                            cpu::exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mb)));
  }
  return m + std::log(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
}

template <>
void row_scaled_softmax<float>(const float* x, float* dl, i64 V, float lse, float c) {
  const __m512 lb = _mm512_set1_ps(lse), cb = _mm512_set1_ps(c);
  for (i64 i = 0; i < V; i += 16) {
    const __mmask16 k = cpu::tail_mask(V - i);
    const __m512 p = cpu::exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), lb));
    _mm512_mask_storeu_ps(dl + i, k, _mm512_mul_ps(p, cb));
  }
}
#endif

}  // namespace

template <class T>
void xent_fwd(const T* logits, const int32_t* labels, T* lse, T* ce, i64 rows, i64 V) {
#pragma omp parallel for schedule(static) if (rows * V >= cpu::kParallelMin)
  for (i64 r = 0; r < rows; ++r) {
    const T* x = logits + r * V;
    const T l = row_lse(x, V);
    lse[r] = l;
    ce[r] = labels[r] >= 0 ? l - x[labels[r]] : T(0);
  }
}

// d/dx (ce_scale * (lse - x_y) + z_scale * lse^2) = softmax * (ce_scale + 2 z_scale lse)
// - ce_scale * onehot(y).
template <class T>
void xent_bwd(const T* logits, const int32_t* labels, const T* lse, T* dlogits, i64 rows, i64 V,
              T ce_scale, T z_scale) {
#pragma omp parallel for schedule(static) if (rows * V >= cpu::kParallelMin)
  for (i64 r = 0; r < rows; ++r) {
    const int32_t y = labels[r];
    const T cs = y >= 0 ? ce_scale : T(0);
    row_scaled_softmax(logits + r * V, dlogits + r * V, V, lse[r], cs + T(2) * z_scale * lse[r]);
    if (y >= 0) dlogits[r * V + y] -= cs;
  }
}

#define MARIN_INST(T)                                                    \
  template void xent_fwd<T>(const T*, const int32_t*, T*, T*, i64, i64); \
  template void xent_bwd<T>(const T*, const int32_t*, const T*, T*, i64, i64, T, T);
MARIN_INST(float)
MARIN_INST(double)
#undef MARIN_INST

}  // namespace marin::kernels
