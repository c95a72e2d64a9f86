// SwiGLU gate: h = silu(a) * b, silu(a) = a * sigmoid(a). The float blocks are SIMD, compiled per
// Highway target and chosen at start-up; double keeps the exact scalar path.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/elementwise.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {

void SwigluFwdF32(const float* a, const float* b, float* h, i64 n) {
  MapVectors<2, 1>(n, {a, b}, {h}, [](auto d, const auto* x, auto* y) {
    y[0] = hn::Mul(hn::Mul(x[0], SigmoidF(d, x[0])), x[1]);
  });
}

// d silu / da = s·(1 + a·(1 − s))
void SwigluBwdF32(const float* dh, const float* a, const float* b, float* da, float* db, i64 n) {
  MapVectors<3, 2>(n, {dh, a, b}, {da, db}, [](auto d, const auto* x, auto* y) {
    const auto one = hn::Set(d, 1.0f), s = SigmoidF(d, x[1]);
    const auto ds = hn::Mul(s, hn::MulAdd(x[1], hn::Sub(one, s), one));
    y[0] = hn::Mul(hn::Mul(x[0], x[2]), ds);
    y[1] = hn::Mul(hn::Mul(x[0], x[1]), s);
  });
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(SwigluFwdF32);
HWY_EXPORT(SwigluBwdF32);
}  // namespace cpu

using cpu::for_blocks;
using cpu::sigmoid;

template <class T>
void swiglu_fwd(const T* a, const T* b, T* h, i64 n) {
  for_blocks(n, [&](i64 i0, i64 len) {
    if constexpr (std::is_same_v<T, float>)
      HWY_DYNAMIC_DISPATCH(cpu::SwigluFwdF32)(a + i0, b + i0, h + i0, len);
    else
      for (i64 i = i0; i < i0 + len; ++i) h[i] = a[i] * sigmoid(a[i]) * b[i];
  });
}

template <class T>
void swiglu_bwd(const T* dh, const T* a, const T* b, T* da, T* db, i64 n) {
  for_blocks(n, [&](i64 i0, i64 len) {
    if constexpr (std::is_same_v<T, float>)
      HWY_DYNAMIC_DISPATCH(cpu::SwigluBwdF32)(dh + i0, a + i0, b + i0, da + i0, db + i0, len);
    else
      for (i64 i = i0; i < i0 + len; ++i) {
        const T s = sigmoid(a[i]), ai = a[i], g = dh[i];
        da[i] = g * b[i] * s * (T(1) + ai * (T(1) - s));
        db[i] = g * ai * s;
      }
  });
}

template void swiglu_fwd<float>(const float*, const float*, float*, i64);
template void swiglu_fwd<double>(const double*, const double*, double*, i64);
template void swiglu_bwd<float>(const float*, const float*, const float*, float*, float*, i64);
template void swiglu_bwd<double>(const double*, const double*, const double*, double*, double*,
                                 i64);

}  // namespace marin::kernels
#endif  // HWY_ONCE
