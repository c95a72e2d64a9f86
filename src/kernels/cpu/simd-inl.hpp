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

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // MARIN_KERNELS_SIMD_INL_H_
