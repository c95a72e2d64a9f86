// SwiGLU gate: h = silu(a) * b, silu(a) = a * sigmoid(a). Float path uses the AVX-512 exp.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

namespace marin::kernels {

namespace {
constexpr i64 kBlock = 4096;  // elements per parallel work item

template <class T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
void swiglu_fwd_block(const T* a, const T* b, T* h, i64 n) {
  for (i64 i = 0; i < n; ++i) h[i] = a[i] * sigmoid(a[i]) * b[i];
}
template <class T>
void swiglu_bwd_block(const T* dh, const T* a, const T* b, T* da, T* db, i64 n) {
  for (i64 i = 0; i < n; ++i) {
    const T s = sigmoid(a[i]), ai = a[i], g = dh[i];
    da[i] = g * b[i] * s * (T(1) + ai * (T(1) - s));
    db[i] = g * ai * s;
  }
}

#ifdef __AVX512F__
template <>
void swiglu_fwd_block<float>(const float* a, const float* b, float* h, i64 n) {
  for (i64 i = 0; i < n; i += 16) {
    const __mmask16 m = cpu::tail_mask(n - i);
    const __m512 av = _mm512_maskz_loadu_ps(m, a + i), bv = _mm512_maskz_loadu_ps(m, b + i);
    const __m512 s = cpu::sigmoid512(av);
    _mm512_mask_storeu_ps(h + i, m, _mm512_mul_ps(_mm512_mul_ps(av, s), bv));
  }
}
template <>
void swiglu_bwd_block<float>(const float* dh, const float* a, const float* b, float* da, float* db,
                             i64 n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (i64 i = 0; i < n; i += 16) {
    const __mmask16 m = cpu::tail_mask(n - i);
    const __m512 av = _mm512_maskz_loadu_ps(m, a + i), bv = _mm512_maskz_loadu_ps(m, b + i);
    const __m512 g = _mm512_maskz_loadu_ps(m, dh + i);
    const __m512 s = cpu::sigmoid512(av);
    // d silu / da = s * (1 + a (1 - s))
    const __m512 ds = _mm512_mul_ps(s, _mm512_fmadd_ps(av, _mm512_sub_ps(one, s), one));
    _mm512_mask_storeu_ps(da + i, m, _mm512_mul_ps(_mm512_mul_ps(g, bv), ds));
    _mm512_mask_storeu_ps(db + i, m, _mm512_mul_ps(_mm512_mul_ps(g, av), s));
  }
}
#endif
}  // namespace

template <class T>
void swiglu_fwd(const T* a, const T* b, T* h, i64 n) {
  const i64 nb = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMin)
  for (i64 k = 0; k < nb; ++k) {
    const i64 i0 = k * kBlock, len = std::min(kBlock, n - i0);
    swiglu_fwd_block(a + i0, b + i0, h + i0, len);
  }
}

template <class T>
void swiglu_bwd(const T* dh, const T* a, const T* b, T* da, T* db, i64 n) {
  const i64 nb = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMin)
  for (i64 k = 0; k < nb; ++k) {
    const i64 i0 = k * kBlock, len = std::min(kBlock, n - i0);
    swiglu_bwd_block(dh + i0, a + i0, b + i0, da + i0, db + i0, len);
  }
}

template void swiglu_fwd<float>(const float*, const float*, float*, i64);
template void swiglu_fwd<double>(const double*, const double*, double*, i64);
template void swiglu_bwd<float>(const float*, const float*, const float*, float*, float*, i64);
template void swiglu_bwd<double>(const double*, const double*, const double*, double*, double*,
                                 i64);

}  // namespace marin::kernels
