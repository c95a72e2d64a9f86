// Σ x² in double (kernels/optim.hpp): the hyperball radii, Newton–Schulz's normalisation and the
// gradient norms of every step read it over every weight, so the float path is SIMD, compiled
// per Highway target and chosen at start-up (the scalar loop was 1.6 % of a cpu-small step).
//
// The order of the sum is fixed, not the vector width's: 16 partial sums (element i goes to sum
// i mod 16, in index order), then those 16 in order. A float's square is exact in double, so
// each step is one rounded add on any ISA, and every target computes the same bits as the
// scalar definition (a run keeps its numerics on another machine kind, at any thread count).
#include <algorithm>

#include "kernels/optim.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/sum_squares.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

double SumSquaresF32(const float* x, i64 n) {
  constexpr int kPartials = kSumSquaresPartials;
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;  // as many floats as dd has doubles
  using V = hn::Vec<decltype(dd)>;
  constexpr int kLanes = int(HWY_LANES(double)), kVecs = kPartials / kLanes;
  static_assert(kPartials % kLanes == 0, "the partial sums fill whole vectors");
  V acc[kVecs];
  for (auto& a : acc) a = hn::Zero(dd);
  auto block = [&](const float* p) {
    for (int v = 0; v < kVecs; ++v) {
      const V xv = hn::PromoteTo(dd, hn::LoadU(df, p + v * kLanes));
      acc[v] = hn::MulAdd(xv, xv, acc[v]);  // exact square: the same as Mul then Add
    }
  };
  i64 i = 0;
  for (; i + kPartials <= n; i += kPartials) block(x + i);
  if (i < n) {  // the tail through a zero-padded block: + 0² leaves a partial sum unchanged
    alignas(64) float pad[kPartials] = {};
    std::copy(x + i, x + n, pad);
    block(pad);
  }
  alignas(64) double s[kPartials];
  for (int v = 0; v < kVecs; ++v) hn::Store(acc[v], dd, s + v * kLanes);
  double total = 0;
  for (double p : s) total += p;
  return total;
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(SumSquaresF32);
}  // namespace cpu

template <>
double sum_squares<float>(const float* x, i64 n) {
  return HWY_DYNAMIC_DISPATCH(cpu::SumSquaresF32)(x, n);
}

template <>
double sum_squares<double>(const double* x, i64 n) {
  double s[kSumSquaresPartials] = {};
  for (i64 i = 0; i < n; ++i) s[i % kSumSquaresPartials] += x[i] * x[i];
  double total = 0;
  for (double p : s) total += p;
  return total;
}

}  // namespace marin::kernels
#endif  // HWY_ONCE
