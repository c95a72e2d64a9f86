// Per-target vector helpers for the float kernels, compiled once per Highway target: included
// after <hwy/highway.h> by every kernel file that goes through hwy/foreach_target.h. The guard
// toggles with HWY_TARGET_TOGGLE so each target's pass sees the definitions again.
#if defined(MARIN_KERNELS_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MARIN_KERNELS_SIMD_INL_H_
#undef MARIN_KERNELS_SIMD_INL_H_
#else
#define MARIN_KERNELS_SIMD_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Floats per vector on this target (4 on the 128-bit ones, 8 on AVX2, 16 on AVX-512).
inline constexpr int kLanes = int(HWY_LANES(float));
// Vector registers the register-blocked loops may fill with accumulators: half the register
// file, so loads and broadcasts still have room (AVX-512 has 32 registers, the others 16).
inline constexpr int kAccRegs = (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL) ? 16 : 8;

// exp(x), ~1 ulp (Highway's Exp). The clamp keeps its integer exponent in range: -inf and
// inputs below -104 give 0, inputs above 88.8 give +inf, as std::exp does.
template <class D, class V>
HWY_INLINE V ExpF(D d, V x) {
  x = hn::Min(hn::Max(x, hn::Set(d, -110.0f)), hn::Set(d, 88.8f));
  return hn::Exp(d, x);
}

// sigmoid(x) = 1 / (1 + exp(-x)), exact division (no reciprocal approximation).
template <class D, class V>
HWY_INLINE V SigmoidF(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, ExpF(d, hn::Neg(x))));
}

// The element-wise loop of the float kernels: f(x, y) maps kIn input vectors to kOut output
// vectors, over whole vectors, then over the tail through zero-padded copies (so f never sees a
// lane past n). An output may alias an input (each vector is loaded before it is stored).
template <size_t kIn, size_t kOut, class F>
HWY_INLINE void MapVectors(int64_t n, const float* const (&in)[kIn], float* const (&out)[kOut],
                           F f) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  V x[kIn], y[kOut];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kIn; ++j) x[j] = hn::LoadU(d, in[j] + i);
    f(d, x, y);
    for (size_t k = 0; k < kOut; ++k) hn::StoreU(y[k], d, out[k] + i);
  }
  if (i == n) return;
  alignas(64) float buf[kIn > kOut ? kIn : kOut][kLanes] = {};
  for (size_t j = 0; j < kIn; ++j) {
    std::copy(in[j] + i, in[j] + n, buf[j]);
    x[j] = hn::Load(d, buf[j]);
  }
  f(d, x, y);
  for (size_t k = 0; k < kOut; ++k) {
    hn::Store(y[k], d, buf[k]);
    std::copy(buf[k], buf[k] + (n - i), out[k] + i);
  }
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // MARIN_KERNELS_SIMD_INL_H_
