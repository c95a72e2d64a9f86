#pragma once
// Private helpers for the CPU kernels: AVX-512 exp / reductions for the float paths, and a
// per-thread scratch vector that grows but is never freed, so hot calls do not allocate.
#include <cmath>
#include <cstddef>
#include <vector>

#ifdef __AVX512F__
// GCC 12 reports a false -Wmaybe-uninitialized inside its own AVX-512 headers (the unmasked
// intrinsics pass _mm512_undefined_ps()); the state at the header's lines is what counts.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace marin::kernels::cpu {

// Scratch memory owned by the calling thread; `slot` picks one of a few independent buffers.
// Contents are unspecified on return.
template <class T>
inline T* scratch(int slot, size_t n) {
  thread_local std::vector<T> bufs[8];
  auto& b = bufs[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// Below this many elements a kernel runs on the calling thread (OpenMP fork cost dominates).
inline constexpr long long kParallelMin = 1 << 15;

#ifdef __AVX512F__
// exp(x) for float lanes, ~1 ulp on the normal range; -inf and inputs below ~-103 give 0,
// inputs above ~88.7 saturate to +inf. Cephes polynomial, Cody-Waite reduction, scalef.
inline __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-110.0f), hi = _mm512_set1_ps(88.8f);
  // The mask forms with an explicit source avoid GCC 12's false -Wmaybe-uninitialized on
  // the unmasked intrinsics (they pass _mm512_undefined_ps()).
  const __mmask16 all = 0xFFFF;
  x = _mm512_mask_max_ps(x, all, x, lo);
  x = _mm512_mask_min_ps(x, all, x, hi);
  const __m512 xl = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n =
      _mm512_mask_roundscale_ps(xl, all, xl, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 r2 = _mm512_mul_ps(r, r);
  p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_mask_scalef_ps(p, all, p, n);
}

// sigmoid(x) = 1 / (1 + exp(-x)), exact division (no rcp approximation).
inline __m512 sigmoid512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

inline __mmask16 tail_mask(long long n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u);
}
#endif

}  // namespace marin::kernels::cpu
