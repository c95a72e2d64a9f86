// The two kernels that only incremental decoding needs: attention of one query token over a KV
// cache, and SConv of one token from its tap ring. The rest of a decoding step is the training
// forward at one token (model/ modules, Model::decode).
//
// attention_decode has two implementations behind one entry point: a SIMD float path (hd a
// multiple of the lanes, at most 8 vectors; compiled once per Highway target and chosen at
// start-up, like cpu/attention.cpp) and the generic one (double, other shapes). Both list the
// ring rows of the visible keys first: a division per key and head cost more than the dots.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/decode.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd-inl.hpp"

#ifndef MARIN_KERNELS_DECODE_RING_ROWS  // once, not per Highway target
#define MARIN_KERNELS_DECODE_RING_ROWS
namespace marin::kernels::cpu {
// Element offsets of the rows of keys j0 … j0 + n − 1 in a ring of `cap` rows of `row` elements.
inline i64* ring_rows(i64 j0, i64 n, i64 cap, i64 row) {
  i64* ring = scratch<i64>(2, size_t(n));
  for (i64 j = 0, r = j0 % cap; j < n; ++j, r = r + 1 == cap ? 0 : r + 1) ring[j] = r * row;
  return ring;
}
}  // namespace marin::kernels::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {
namespace {

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;
constexpr int kMaxVecs = 8;  // hd up to 8 vectors (128 on AVX-512, 64 on AVX2)

// Per KV head and visible key: the key row loaded once, its dot with each query head of the group
// (vector products, one horizontal sum); then per head the softmax with vector exp and the
// weighted sum of the value rows.
bool DecodeAttnF32(const DecodeAttnShape& s, const float* q, const float* kc, const float* vc,
                   i64 pos, float* out) {
  const D d;
  const int nv = s.hd / kLanes;
  if (s.hd % kLanes != 0 || nv > kMaxVecs) return false;
  const i64 hd = s.hd, row = i64(s.kv_used) * hd, group = s.H / s.kv_used;
  const i64 j0 = s.window > 0 ? std::max<i64>(0, pos - s.window + 1) : 0;
  const i64 n = pos - j0 + 1, padded = (n + kLanes - 1) / kLanes * kLanes;
  const float scale = 1.0f / std::sqrt(float(hd));
  const i64* ring = ring_rows(j0, n, s.cap, row);
  float* sc = scratch<float>(1, size_t(group * padded));  // [group, padded] scores, then weights
  for (i64 g = 0; g < s.kv_used; ++g) {
    const float* qg = q + g * group * hd;
    for (i64 j = 0; j < n; ++j) {
      const float* kj = kc + ring[j] + g * hd;
      V kv[kMaxVecs];
      for (int u = 0; u < nv; ++u) kv[u] = hn::LoadU(d, kj + u * kLanes);
      for (i64 h = 0; h < group; ++h) {
        const float* qh = qg + h * hd;
        V acc = hn::Mul(hn::LoadU(d, qh), kv[0]);
        for (int u = 1; u < nv; ++u) acc = hn::MulAdd(hn::LoadU(d, qh + u * kLanes), kv[u], acc);
        sc[h * padded + j] = hn::GetLane(hn::SumOfLanes(d, acc)) * scale;
      }
    }
    for (i64 h = 0; h < group; ++h) {
      float* p = sc + h * padded;
      std::fill(p + n, p + padded, -std::numeric_limits<float>::infinity());  // exp → 0
      V mx = hn::Set(d, -std::numeric_limits<float>::infinity());
      for (i64 j = 0; j < padded; j += kLanes) mx = hn::Max(mx, hn::LoadU(d, p + j));
      const V m = hn::Set(d, hn::GetLane(hn::MaxOfLanes(d, mx)));
      V sum = hn::Zero(d);
      for (i64 j = 0; j < padded; j += kLanes) {
        const V e = ExpF(d, hn::Sub(hn::LoadU(d, p + j), m));
        hn::StoreU(e, d, p + j);
        sum = hn::Add(sum, e);
      }
      const float inv = 1.0f / hn::GetLane(hn::SumOfLanes(d, sum));
      V acc[kMaxVecs];
      for (int u = 0; u < nv; ++u) acc[u] = hn::Zero(d);
      for (i64 j = 0; j < n; ++j) {
        const float* vj = vc + ring[j] + g * hd;
        const V w = hn::Set(d, p[j]);
        for (int u = 0; u < nv; ++u) acc[u] = hn::MulAdd(w, hn::LoadU(d, vj + u * kLanes), acc[u]);
      }
      float* yh = out + (g * group + h) * hd;
      for (int u = 0; u < nv; ++u) hn::StoreU(hn::Mul(acc[u], hn::Set(d, inv)), d, yh + u * kLanes);
    }
  }
  return true;
}

}  // namespace
}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(DecodeAttnF32);
}  // namespace cpu

namespace {

template <class T>
void attention_decode_generic(const DecodeAttnShape& s, const T* q, const T* kc, const T* vc,
                              i64 pos, T* out) {
  const i64 hd = s.hd, row = i64(s.kv_used) * hd, group = s.H / s.kv_used;
  const i64 j0 = s.window > 0 ? std::max<i64>(0, pos - s.window + 1) : 0;
  const i64 n = pos - j0 + 1;
  const T scale = T(1) / std::sqrt(T(hd));
  const i64* ring = cpu::ring_rows(j0, n, s.cap, row);
  T* sc = cpu::scratch<T>(0, size_t(n));
  for (i64 h = 0; h < s.H; ++h) {
    const i64 g = h / group;
    const T* qh = q + h * hd;
    T mx = -std::numeric_limits<T>::infinity();
    for (i64 j = 0; j < n; ++j) {
      const T* kj = kc + ring[j] + g * hd;
      T dot = 0;
#pragma omp simd reduction(+ : dot)
      for (i64 i = 0; i < hd; ++i) dot += qh[i] * kj[i];
      sc[j] = dot * scale;
      mx = std::max(mx, sc[j]);
    }
    T sum = 0;
    for (i64 j = 0; j < n; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
    T* yh = out + h * hd;
    std::fill(yh, yh + hd, T(0));
    for (i64 j = 0; j < n; ++j) {
      const T* vj = vc + ring[j] + g * hd;
      const T pj = sc[j] / sum;
#pragma omp simd
      for (i64 i = 0; i < hd; ++i) yh[i] += pj * vj[i];
    }
  }
}

}  // namespace

template <class T>
void attention_decode(const DecodeAttnShape& s, const T* q, const T* kc, const T* vc, i64 pos,
                      T* out) {
  if constexpr (std::is_same_v<T, float>)
    if (HWY_DYNAMIC_DISPATCH(cpu::DecodeAttnF32)(s, q, kc, vc, pos, out)) return;
  attention_decode_generic(s, q, kc, vc, pos, out);
}

template <class T>
void sconv_step(const T* x, const T* w, T* taps, T* y, i64 pos, int C, int k) {
  const i64 n = k - 1;
#pragma omp simd
  for (int c = 0; c < C; ++c) y[c] = w[c] * x[c];
  for (i64 j = 1; j <= n && j <= pos; ++j) {
    const T* xs = taps + ((pos - j) % n) * C;
    const T* wj = w + j * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) y[c] += wj[c] * xs[c];
  }
  if (n > 0) std::copy(x, x + C, taps + (pos % n) * C);
}

template void attention_decode<float>(const DecodeAttnShape&, const float*, const float*,
                                      const float*, i64, float*);
template void attention_decode<double>(const DecodeAttnShape&, const double*, const double*,
                                       const double*, i64, double*);
template void sconv_step<float>(const float*, const float*, float*, float*, i64, int, int);
template void sconv_step<double>(const double*, const double*, double*, double*, i64, int, int);

}  // namespace marin::kernels
#endif  // HWY_ONCE
