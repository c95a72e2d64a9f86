// The arithmetic of the exact gradient sum (parallel::ExactSum, docs/distributed.md "Determinism"):
// a tensor's largest magnitude, the 64-bit fixed-point sum of its partial gradients and the one
// rounding back to float. Compiled per Highway target; every target computes exactly what the
// scalar definition says (llrint in the default rounding mode, i.e. to nearest even, and
// IEEE-rounded int64 → double → float), so the sum stays bit-identical across CPUs. AVX-512DQ
// converts int64 ⇄ double in one instruction; elsewhere the sum splits its terms (FixedPointSum)
// and the way back is Highway's exact emulation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/fixed_point.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {

float MaxAbs(const float* x, i64 n) {
  const hn::ScalableTag<float> df;
  const i64 lanes = i64(hn::Lanes(df));
  auto m = hn::Zero(df);
  auto bad = hn::FirstN(df, 0);  // all false
  i64 i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(df, x + i);
    bad = hn::Or(bad, hn::Not(hn::IsFinite(v)));
    m = hn::Max(m, hn::Abs(v));
  }
  float r = hn::GetLane(hn::MaxOfLanes(df, m));
  bool nonfinite = !hn::AllFalse(df, bad);
  for (; i < n; ++i) {
    nonfinite |= !std::isfinite(x[i]);
    r = std::max(r, std::fabs(x[i]));
  }
  return nonfinite ? std::numeric_limits<float>::infinity() : r;
}

// Σ_p llrint(xs[p][i] · scale) into acc[i]. Where the CPU converts double → int64 itself
// (AVX-512DQ) each rounded term is converted and added. Elsewhere (AVX2 emulates that conversion
// in some fifteen instructions a vector) each rounded term v splits exactly into
// hi = floor(v / 2^32) and lo = v − hi · 2^32 ∈ [0, 2^32); the np his and los add up exactly in
// double (np < 2^19 keeps both sums below 2^51), and only the two sums are converted, by the
// 1.5 · 2^52 bit trick, exact below 2^51: acc = hi_sum · 2^32 + lo_sum, the same integer.
void FixedPointSum(const float* const* xs, int np, i64 n, double scale, int64_t* acc) {
  const hn::ScalableTag<double> dd;
  const hn::RebindToSigned<decltype(dd)> di;
  const hn::Rebind<float, decltype(dd)> df;  // half a float vector: one float per double lane
  const i64 lanes = i64(hn::Lanes(dd));
  const auto s = hn::Set(dd, scale);
  i64 i = 0;
#if HWY_TARGET <= HWY_AVX3
  for (; i + lanes <= n; i += lanes) {
    auto a = hn::Zero(di);
    for (int p = 0; p < np; ++p) {
      const auto v = hn::Mul(hn::PromoteTo(dd, hn::LoadU(df, xs[p] + i)), s);
      a = hn::Add(a, hn::ConvertTo(di, hn::Round(v)));  // exact: Round leaves an integer
    }
    hn::StoreU(a, di, acc + i);
  }
#else
  const auto two_m32 = hn::Set(dd, 0x1p-32), neg_two_32 = hn::Set(dd, -0x1p32);
  const auto magic = hn::Set(dd, 0x1.8p52);
  const auto magic_bits = hn::BitCast(di, magic);
  auto to_int = [&](auto x) { return hn::Sub(hn::BitCast(di, hn::Add(x, magic)), magic_bits); };
  for (; i + lanes <= n; i += lanes) {
    auto hi_sum = hn::Zero(dd), lo_sum = hn::Zero(dd);
    for (int p = 0; p < np; ++p) {
      const auto v = hn::Round(hn::Mul(hn::PromoteTo(dd, hn::LoadU(df, xs[p] + i)), s));
      const auto hi = hn::Floor(hn::Mul(v, two_m32));
      hi_sum = hn::Add(hi_sum, hi);
      lo_sum = hn::Add(lo_sum, hn::MulAdd(hi, neg_two_32, v));
    }
    hn::StoreU(hn::Add(hn::ShiftLeft<32>(to_int(hi_sum)), to_int(lo_sum)), di, acc + i);
  }
#endif
  for (; i < n; ++i) {
    int64_t a = 0;
    for (int p = 0; p < np; ++p) a += std::llrint(double(xs[p][i]) * scale);
    acc[i] = a;
  }
}

void FixedPointToFloat(const int64_t* acc, i64 n, double inv, float* out) {
  const hn::ScalableTag<double> dd;
  const hn::RebindToSigned<decltype(dd)> di;
  const hn::Rebind<float, decltype(dd)> df;
  const i64 lanes = i64(hn::Lanes(dd));
  const auto s = hn::Set(dd, inv);
  i64 i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::Mul(hn::ConvertTo(dd, hn::LoadU(di, acc + i)), s);
    hn::StoreU(hn::DemoteTo(df, v), df, out + i);
  }
  for (; i < n; ++i) out[i] = float(double(acc[i]) * inv);
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(MaxAbs);
HWY_EXPORT(FixedPointSum);
HWY_EXPORT(FixedPointToFloat);
}  // namespace cpu

// Every element is its own sum and a maximum is exact in any order, so large tensors split over
// the compute threads without changing a bit (the step's exact sum was single-threaded: 45 ms of
// a two-thread cpu-small step on a Zen 5).
float max_abs(const float* x, i64 n) {
  const auto kernel = HWY_DYNAMIC_DISPATCH(cpu::MaxAbs);
  if (n < cpu::kParallelMin) return kernel(x, n);
  std::vector<float> part(size_t(cpu::blocks_of(n)));
  cpu::for_blocks(n, [&](i64 b, i64 len) { part[size_t(b / cpu::kBlock)] = kernel(x + b, len); });
  return *std::max_element(part.begin(), part.end());
}

void fixed_point_sum(const float* const* xs, int np, i64 n, double scale, int64_t* acc) {
  MARIN_CHECK(np < (1 << 19), "fixed_point_sum: {} partial sums (at most 2^19 - 1)", np);
  const auto kernel = HWY_DYNAMIC_DISPATCH(cpu::FixedPointSum);
  cpu::for_blocks(n, [&](i64 b, i64 len) {
    std::vector<const float*> at(xs, xs + np);
    for (const float*& x : at) x += b;
    kernel(at.data(), np, len, scale, acc + b);
  });
}

void fixed_point_to_float(const int64_t* acc, i64 n, double inv, float* out) {
  const auto kernel = HWY_DYNAMIC_DISPATCH(cpu::FixedPointToFloat);
  cpu::for_blocks(n, [&](i64 b, i64 len) { kernel(acc + b, len, inv, out + b); });
}

}  // namespace marin::kernels
#endif  // HWY_ONCE
