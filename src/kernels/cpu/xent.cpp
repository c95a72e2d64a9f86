// Softmax cross-entropy with z-loss over rows of logits. The float row passes (max, exp-sum,
// scaled softmax) are SIMD, compiled per Highway target and chosen at start-up; double keeps the
// exact scalar path. A negative label marks an ignored row: ce = 0 and no one-hot term in the
// gradient (lse and the z-loss term are still produced).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/xent.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {

// log-sum-exp of one row.
float RowLseF32(const float* x, i64 V) {
  const hn::ScalableTag<float> d;
  const float ninf = -std::numeric_limits<float>::infinity();
  auto mv = hn::Set(d, ninf);
  i64 i = 0;
  for (; i + kLanes <= V; i += kLanes) mv = hn::Max(mv, hn::LoadU(d, x + i));
  float m = hn::GetLane(hn::MaxOfLanes(d, mv));
  for (i64 t = i; t < V; ++t) m = std::max(m, x[t]);
  const auto mb = hn::Set(d, m);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  i = 0;
  for (; i + 2 * kLanes <= V; i += 2 * kLanes) {
    s0 = hn::Add(s0, ExpF(d, hn::Sub(hn::LoadU(d, x + i), mb)));
    s1 = hn::Add(s1, ExpF(d, hn::Sub(hn::LoadU(d, x + i + kLanes), mb)));
  }
  for (; i + kLanes <= V; i += kLanes) s0 = hn::Add(s0, ExpF(d, hn::Sub(hn::LoadU(d, x + i), mb)));
  if (i < V) {  // the tail through a padded buffer: -inf contributes exp = 0
    alignas(64) float buf[kLanes];
    std::fill(buf, buf + kLanes, ninf);
    std::copy(x + i, x + V, buf);
    s0 = hn::Add(s0, ExpF(d, hn::Sub(hn::Load(d, buf), mb)));
  }
  return m + std::log(hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1))));
}

// dl[i] = exp(x[i] - lse) * c; may alias.
void RowScaledSoftmaxF32(const float* x, float* dl, i64 V, float lse, float c) {
  const hn::ScalableTag<float> d;
  const auto lb = hn::Set(d, lse), cb = hn::Set(d, c);
  i64 i = 0;
  for (; i + kLanes <= V; i += kLanes)
    hn::StoreU(hn::Mul(ExpF(d, hn::Sub(hn::LoadU(d, x + i), lb)), cb), d, dl + i);
  if (i < V) {
    alignas(64) float buf[kLanes] = {};
    std::copy(x + i, x + V, buf);
    hn::Store(hn::Mul(ExpF(d, hn::Sub(hn::Load(d, buf), lb)), cb), d, buf);
    std::copy(buf, buf + (V - i), dl + i);
  }
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(RowLseF32);
HWY_EXPORT(RowScaledSoftmaxF32);
}  // namespace cpu

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

template <>
float row_lse<float>(const float* x, i64 V) {
  return HWY_DYNAMIC_DISPATCH(cpu::RowLseF32)(x, V);
}

template <>
void row_scaled_softmax<float>(const float* x, float* dl, i64 V, float lse, float c) {
  HWY_DYNAMIC_DISPATCH(cpu::RowScaledSoftmaxF32)(x, dl, V, lse, c);
}

}  // namespace

template <class T>
void xent_fwd(const T* logits, const int32_t* labels, T* lse, T* ce, i64 rows, i64 V) {
  cpu::parallel_for(rows, rows * V >= cpu::kParallelMin, [&](i64 r) {
    const T* x = logits + r * V;
    const T l = row_lse(x, V);
    lse[r] = l;
    ce[r] = labels[r] >= 0 ? l - x[labels[r]] : T(0);
  });
}

// d/dx (ce_scale * (lse - x_y) + z_scale * lse^2) = softmax * (ce_scale + 2 z_scale lse)
// - ce_scale * onehot(y).
template <class T>
void xent_bwd(const T* logits, const int32_t* labels, const T* lse, T* dlogits, i64 rows, i64 V,
              T ce_scale, T z_scale) {
  cpu::parallel_for(rows, rows * V >= cpu::kParallelMin, [&](i64 r) {
    const int32_t y = labels[r];
    const T cs = y >= 0 ? ce_scale : T(0);
    row_scaled_softmax(logits + r * V, dlogits + r * V, V, lse[r], cs + T(2) * z_scale * lse[r]);
    if (y >= 0) dlogits[r * V + y] -= cs;
  });
}

#define MARIN_INST(T)                                                    \
  template void xent_fwd<T>(const T*, const int32_t*, T*, T*, i64, i64); \
  template void xent_bwd<T>(const T*, const int32_t*, const T*, T*, i64, i64, T, T);
MARIN_INST(float)
MARIN_INST(double)
#undef MARIN_INST

}  // namespace marin::kernels
#endif  // HWY_ONCE
