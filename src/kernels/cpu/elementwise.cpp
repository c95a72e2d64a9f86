// SwiGLU gate: h = silu(a) * b, silu(a) = a * sigmoid(a). The float blocks are SIMD, compiled per
// Highway target and chosen at start-up; double keeps the exact scalar path.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/elementwise.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {

namespace {
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

HWY_INLINE V swiglu_fwd_vec(D d, V a, V b) {
  return hn::Mul(hn::Mul(a, SigmoidF(d, a)), b);
}
// d silu / da = s * (1 + a (1 - s))
HWY_INLINE void swiglu_bwd_vec(D d, V g, V a, V b, V& da, V& db) {
  const V one = hn::Set(d, 1.0f), s = SigmoidF(d, a);
  const V ds = hn::Mul(s, hn::MulAdd(a, hn::Sub(one, s), one));
  da = hn::Mul(hn::Mul(g, b), ds);
  db = hn::Mul(hn::Mul(g, a), s);
}
}  // namespace

void SwigluFwdF32(const float* a, const float* b, float* h, i64 n) {
  const D d;
  i64 i = 0;
  for (; i + kLanes <= n; i += kLanes)
    hn::StoreU(swiglu_fwd_vec(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, h + i);
  if (i < n) {  // the tail through zero-padded buffers
    alignas(64) float ab[kLanes] = {}, bb[kLanes] = {};
    std::copy(a + i, a + n, ab);
    std::copy(b + i, b + n, bb);
    hn::Store(swiglu_fwd_vec(d, hn::Load(d, ab), hn::Load(d, bb)), d, ab);
    std::copy(ab, ab + (n - i), h + i);
  }
}

void SwigluBwdF32(const float* dh, const float* a, const float* b, float* da, float* db, i64 n) {
  const D d;
  i64 i = 0;
  V dav, dbv;
  for (; i + kLanes <= n; i += kLanes) {
    swiglu_bwd_vec(d, hn::LoadU(d, dh + i), hn::LoadU(d, a + i), hn::LoadU(d, b + i), dav, dbv);
    hn::StoreU(dav, d, da + i);
    hn::StoreU(dbv, d, db + i);
  }
  if (i < n) {
    alignas(64) float gb[kLanes] = {}, ab[kLanes] = {}, bb[kLanes] = {};
    std::copy(dh + i, dh + n, gb);
    std::copy(a + i, a + n, ab);
    std::copy(b + i, b + n, bb);
    swiglu_bwd_vec(d, hn::Load(d, gb), hn::Load(d, ab), hn::Load(d, bb), dav, dbv);
    hn::Store(dav, d, gb);
    hn::Store(dbv, d, ab);
    std::copy(gb, gb + (n - i), da + i);
    std::copy(ab, ab + (n - i), db + i);
  }
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(SwigluFwdF32);
HWY_EXPORT(SwigluBwdF32);
}  // namespace cpu

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

template <>
void swiglu_fwd_block<float>(const float* a, const float* b, float* h, i64 n) {
  HWY_DYNAMIC_DISPATCH(cpu::SwigluFwdF32)(a, b, h, n);
}
template <>
void swiglu_bwd_block<float>(const float* dh, const float* a, const float* b, float* da, float* db,
                             i64 n) {
  HWY_DYNAMIC_DISPATCH(cpu::SwigluBwdF32)(dh, a, b, da, db, n);
}
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
#endif  // HWY_ONCE
