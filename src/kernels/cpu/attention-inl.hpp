// The parts of the SIMD attention kernels that do not depend on the products' precision,
// shared by the fp32 tiles (cpu/attention.cpp) and the bf16 ones (cpu/attention_bf16.cpp): the
// vectorised masks and the online softmax, all fp32. Compiled once per Highway target: included
// after simd-inl.hpp by files that go through hwy/foreach_target.h (the guard toggles with
// HWY_TARGET_TOGGLE, as simd-inl.hpp's does).
#if defined(MARIN_KERNELS_ATTENTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MARIN_KERNELS_ATTENTION_INL_H_
#undef MARIN_KERNELS_ATTENTION_INL_H_
#else
#define MARIN_KERNELS_ATTENTION_INL_H_
#endif

#include <hwy/highway.h>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/kernels.hpp"

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {
namespace {

using D = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<D>;
using V = hn::Vec<D>;

// The head dimensions the tiled kernels (fp32 and bf16) are instantiated for: calls
// run(std::integral_constant<int, HD>{}) for hd among them and returns true; false for any other
// (the caller's row-by-row path).
template <class Run>
bool with_head_dim(int hd, Run&& run) {
  switch (hd) {
    case 16:
      return run(std::integral_constant<int, 16>{}), true;
    case 32:
      return run(std::integral_constant<int, 32>{}), true;
    case 64:
      return run(std::integral_constant<int, 64>{}), true;
    case 128:
      return run(std::integral_constant<int, 128>{}), true;
    default:
      return false;
  }
}

constexpr int BQ = 32;  // query tile (multiple of 8)
constexpr int BK = 32;  // key block (multiple of the lane count)
static_assert(BK % kLanes == 0);

// The lanes where query t sees key j (int32 lanes; either side may be a broadcast): j <= t,
// j > t - window when there is a window, and one segment. The vector twin of attention_rows.hpp's
// `visible`, for both masks below.
template <class VI>
HWY_INLINE auto sees(VI t, VI j, VI seg_t, VI seg_j, int window) {
  const DI di;
  auto ok = hn::And(hn::Lt(j, hn::Add(t, hn::Set(di, 1))), hn::Eq(seg_t, seg_j));
  if (window > 0) ok = hn::And(ok, hn::Gt(j, hn::Sub(t, hn::Set(di, window))));
  return ok;
}

// p[0 .. kLanes) = -inf where `ok` is false.
template <class M>
HWY_INLINE void mask_lanes(float* p, M ok) {
  const D d;
  const V ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  hn::StoreU(hn::IfThenElse(hn::RebindMask(d, ok), hn::LoadU(d, p), ninf), d, p);
}

// Sets masked entries of one score row (query t, keys kb..kb+BK) to -inf.
HWY_INLINE void mask_row(float* row, int t, int kb, int window, const int32_t* segp, int32_t segt) {
  const DI di;
  const auto tv = hn::Set(di, t), sv = hn::Set(di, segt);
  for (int c = 0; c < BK / kLanes; ++c) {
    const auto j = hn::Iota(di, kb + kLanes * c);
    mask_lanes(row + kLanes * c, sees(tv, j, sv, hn::LoadU(di, segp + kb + kLanes * c), window));
  }
}

inline int padded(int S) {
  return (S + BK + 15) / 16 * 16;
}

inline void pack_seg(const int32_t* seg, int S, int32_t* segp) {
  std::copy(seg, seg + S, segp);
  std::fill(segp + S, segp + padded(S), 0);
}

// True when every key in [kb, kb+BK) is visible from every query in [t0, tl].
inline bool block_full(int kb, int t0, int tl, int window, const int* run) {
  return kb + BK - 1 <= t0 && (window == 0 || kb > tl - window) && run[tl] <= kb;
}

// Sets the entries of one key's row of transposed scores (key j, queries t0 .. t0+BQ) that the
// queries cannot see to -inf.
HWY_INLINE void mask_key_row(float* row, int j, int t0, int window, const int32_t* segp) {
  const DI di;
  const auto jv = hn::Set(di, j), sv = hn::Set(di, segp[j]);
  for (int c = 0; c < BQ / kLanes; ++c) {
    const auto t = hn::Iota(di, t0 + kLanes * c);
    mask_lanes(row + kLanes * c, sees(t, jv, hn::LoadU(di, segp + t0 + kLanes * c), sv, window));
  }
}

// One key block of the online softmax, on scores transposed (ScT[BK][BQ]: a key per row, the
// tile's queries across the lanes), so every step is a vector over queries: each query's block
// maximum is a Max down the rows, its running max m and rescale alpha = exp(m_old - m_new)
// follow, the scores become p = exp(s - m_new) and their sum down the rows joins l. No
// horizontal reduction and no scalar exp. A query that sees no key of the block keeps its m
// (alpha = 1, its p all 0).
HWY_INLINE void softmax_block_t(float* ScT, float* m, float* l, float* alpha) {
  static_assert(BK % 2 == 0 && BQ % kLanes == 0);
  const D d;
  const V ninf = hn::Set(d, -std::numeric_limits<float>::infinity()), one = hn::Set(d, 1.0f);
  const V zero = hn::Zero(d);
  for (int c = 0; c < BQ; c += kLanes) {
    V mx0 = hn::LoadU(d, ScT + c), mx1 = hn::LoadU(d, ScT + BQ + c);
    for (int r = 2; r < BK; r += 2) {
      mx0 = hn::Max(mx0, hn::LoadU(d, ScT + r * BQ + c));
      mx1 = hn::Max(mx1, hn::LoadU(d, ScT + (r + 1) * BQ + c));
    }
    const V mx = hn::Max(mx0, mx1), mold = hn::LoadU(d, m + c);
    const auto none = hn::Eq(mx, ninf);
    const V mnew = hn::IfThenElse(none, mold, hn::Max(mold, mx));
    const V a = hn::IfThenElse(none, one, ExpF(d, hn::Sub(mold, mnew)));
    // -inf - -inf would be NaN where nothing has been seen yet; exp(-inf - 0) is 0.
    const V msub = hn::IfThenElse(hn::Eq(mnew, ninf), zero, mnew);
    V sum0 = zero, sum1 = zero;
    for (int r = 0; r < BK; r += 2) {
      float* p0 = ScT + r * BQ + c;
      float* p1 = p0 + BQ;
      const V e0 = ExpF(d, hn::Sub(hn::LoadU(d, p0), msub));
      const V e1 = ExpF(d, hn::Sub(hn::LoadU(d, p1), msub));
      hn::StoreU(e0, d, p0);
      hn::StoreU(e1, d, p1);
      sum0 = hn::Add(sum0, e0);
      sum1 = hn::Add(sum1, e1);
    }
    hn::StoreU(hn::Add(hn::Mul(hn::LoadU(d, l + c), a), hn::Add(sum0, sum1)), d, l + c);
    hn::StoreU(mnew, d, m + c);
    hn::StoreU(a, d, alpha + c);
  }
}

// The backward's probabilities and score gradients of one block, in place, for the tile's first
// nq queries (rows of P and dS[BQ][BK], keys kb .. kb+BK): P = exp(s - L), masked unless the
// block is `full`ly visible, and dS = P (dP - D).
HWY_INLINE void probs_and_dscores(float* P, float* dS, int nq, int t0, int kb, bool full,
                                  int window, const int32_t* segp, const float* Lv,
                                  const float* Dv) {
  const D d;
  for (int i = 0; i < nq; ++i) {
    float *pr = P + i * BK, *dr = dS + i * BK;
    if (!full) mask_row(pr, t0 + i, kb, window, segp, segp[t0 + i]);
    const V lb = hn::Set(d, Lv[i]), db = hn::Set(d, Dv[i]);
    for (int c = 0; c < BK / kLanes; ++c) {
      const V p = ExpF(d, hn::Sub(hn::LoadU(d, pr + kLanes * c), lb));
      hn::StoreU(p, d, pr + kLanes * c);
      hn::StoreU(hn::Mul(p, hn::Sub(hn::LoadU(d, dr + kLanes * c), db)), d, dr + kLanes * c);
    }
  }
}

}  // namespace
}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // MARIN_KERNELS_ATTENTION_INL_H_
