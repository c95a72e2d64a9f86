// GatedNorm's element-wise kernels (see kernels/gates.hpp). The float paths are SIMD, compiled per
// Highway target and chosen at start-up (the scalar libm exp of the sigmoid gate was 3 % of a
// cpu-small forward+backward); double keeps the exact scalar path. Independent elements, so the
// threaded split cannot change a result.
#include "kernels/gates.hpp"

#include <cmath>
#include <type_traits>

#include "kernels/cpu/simd.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gates.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {

void SiluFwdF32(const float* u, float* su, i64 n) {
  MapVectors<1, 1>(n, {u}, {su},
                   [](auto d, const auto* x, auto* y) { y[0] = hn::Mul(x[0], SigmoidF(d, x[0])); });
}

// silu'(u) = s·(1 + u·(1 − s)), s = σ(u)
void SiluBwdF32(const float* dsu, const float* u, float* du, i64 n) {
  MapVectors<2, 1>(n, {dsu, u}, {du}, [](auto d, const auto* x, auto* y) {
    const auto one = hn::Set(d, 1.0f), s = SigmoidF(d, x[1]);
    y[0] = hn::Mul(x[0], hn::Mul(s, hn::MulAdd(x[1], hn::Sub(one, s), one)));
  });
}

void SigmoidGateFwdF32(const float* r, float* g, float* out, i64 n) {
  MapVectors<2, 2>(n, {r, g}, {g, out}, [](auto d, const auto* x, auto* y) {
    y[0] = SigmoidF(d, x[1]);
    y[1] = hn::Mul(x[0], y[0]);
  });
}

void SigmoidGateBwdF32(const float* dout, const float* r, const float* g, float* dr,
                       float* dg_logit, i64 n) {
  MapVectors<3, 2>(n, {dout, r, g}, {dr, dg_logit}, [](auto d, const auto* x, auto* y) {
    y[0] = hn::Mul(x[0], x[2]);
    y[1] = hn::Mul(hn::Mul(hn::Mul(x[0], x[1]), x[2]), hn::Sub(hn::Set(d, 1.0f), x[2]));
  });
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(SiluFwdF32);
HWY_EXPORT(SiluBwdF32);
HWY_EXPORT(SigmoidGateFwdF32);
HWY_EXPORT(SigmoidGateBwdF32);
}  // namespace cpu

using cpu::for_blocks;
using cpu::sigmoid;

template <class T>
void silu_fwd(const T* u, T* su, i64 n) {
  for_blocks(n, [&](i64 i0, i64 len) {
    if constexpr (std::is_same_v<T, float>)
      HWY_DYNAMIC_DISPATCH(cpu::SiluFwdF32)(u + i0, su + i0, len);
    else
      for (i64 i = i0; i < i0 + len; ++i) su[i] = u[i] * sigmoid(u[i]);
  });
}

template <class T>
void silu_bwd(const T* dsu, const T* u, T* du, i64 n) {
  for_blocks(n, [&](i64 i0, i64 len) {
    if constexpr (std::is_same_v<T, float>)
      HWY_DYNAMIC_DISPATCH(cpu::SiluBwdF32)(dsu + i0, u + i0, du + i0, len);
    else
      for (i64 i = i0; i < i0 + len; ++i) {
        const T s = sigmoid(u[i]);
        du[i] = dsu[i] * (s * (T(1) + u[i] * (T(1) - s)));
      }
  });
}

template <class T>
void sigmoid_gate_fwd(const T* r, T* g, T* out, i64 n) {
  for_blocks(n, [&](i64 i0, i64 len) {
    if constexpr (std::is_same_v<T, float>)
      HWY_DYNAMIC_DISPATCH(cpu::SigmoidGateFwdF32)(r + i0, g + i0, out + i0, len);
    else
      for (i64 i = i0; i < i0 + len; ++i) {
        g[i] = sigmoid(g[i]);
        out[i] = r[i] * g[i];
      }
  });
}

template <class T>
void sigmoid_gate_bwd(const T* dout, const T* r, const T* g, T* dr, T* dg_logit, i64 n) {
  for_blocks(n, [&](i64 i0, i64 len) {
    if constexpr (std::is_same_v<T, float>) HWY_DYNAMIC_DISPATCH(cpu::SigmoidGateBwdF32)
    (dout + i0, r + i0, g + i0, dr + i0, dg_logit + i0, len);
    else for (i64 i = i0; i < i0 + len; ++i) {
      dr[i] = dout[i] * g[i];
      dg_logit[i] = dout[i] * r[i] * g[i] * (T(1) - g[i]);
    }
  });
}

#define MARIN_GATE_KERNELS(T)                               \
  template void silu_fwd<T>(const T*, T*, i64);             \
  template void silu_bwd<T>(const T*, const T*, T*, i64);   \
  template void sigmoid_gate_fwd<T>(const T*, T*, T*, i64); \
  template void sigmoid_gate_bwd<T>(const T*, const T*, const T*, T*, T*, i64);
MARIN_GATE_KERNELS(float)
MARIN_GATE_KERNELS(double)
#undef MARIN_GATE_KERNELS

}  // namespace marin::kernels
#endif  // HWY_ONCE
