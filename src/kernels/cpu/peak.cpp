// The FMA peak of the machine at hand, measured rather than assumed: every thread runs
// independent chains of vector fused multiply-adds (enough of them to cover the FMA latency on
// two pipes) for a fixed time, and the FLOPs are counted. The fp32 loop is compiled per Highway
// target and runs on the one the kernels dispatch to, so it measures what they can reach here;
// the bf16 loop (vdpbf16ps) runs only where the CPU has avx512_bf16.
#include <omp.h>

#include <chrono>

#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/peak.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kChains = 12;  // ≥ latency (4) × pipes (2), with slack; fits 16 registers

// Runs FMA chains for about `seconds`; returns the FLOPs done.
double FmaChainsF32(double seconds) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int lanes = int(hn::Lanes(d));
  const V a = hn::Set(d, 1.0f + 1e-7f), b = hn::Set(d, 0.999999f);
  V acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = hn::Set(d, float(c + 1) * 1e-3f);
  const auto t0 = std::chrono::steady_clock::now();
  double flops = 0;
  constexpr int kInner = 4096;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    for (int i = 0; i < kInner; ++i)
      for (int c = 0; c < kChains; ++c) acc[c] = hn::MulAdd(acc[c], b, a);
    flops += 2.0 * lanes * kChains * kInner;
  }
  // Keep the result alive so the loop is not optimised away.
  volatile float sink = 0;
  for (int c = 0; c < kChains; ++c) sink = sink + hn::GetLane(acc[c]);
  return flops;
}

int LanesF32() {
  return int(hn::Lanes(hn::ScalableTag<float>()));
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
// The bf16 dot-product loop needs AVX512_BF16, which Highway 1.0 has no target for: it is
// compiled for that extension alone and only called after the CPU reports it.
#if defined(__GNUC__) && !defined(__clang__)  // g++'s false alarm in its own headers
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace marin::kernels {

namespace cpu {
HWY_EXPORT(FmaChainsF32);
HWY_EXPORT(LanesF32);

namespace {
constexpr int kBf16Chains = 12;
// vdpbf16ps: per 32-bit lane, two bf16 products accumulated into fp32 (4 FLOPs per lane).
__attribute__((target("avx512f,avx512bf16"))) double bf16_dot_chains(double seconds) {
  __m512 acc[kBf16Chains];
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3F80);  // bf16 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3380);  // bf16 ~6e-8: stays finite
  for (int c = 0; c < kBf16Chains; ++c) acc[c] = _mm512_set1_ps(float(c + 1) * 1e-3f);
  const auto t0 = std::chrono::steady_clock::now();
  double flops = 0;
  constexpr int kInner = 4096;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    for (int i = 0; i < kInner; ++i)
      for (int c = 0; c < kBf16Chains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
    flops += 4.0 * 16 * kBf16Chains * kInner;
  }
  volatile float sink = 0;
  for (int c = 0; c < kBf16Chains; ++c) sink = sink + _mm512_cvtss_f32(acc[c]);
  return flops;
}
}  // namespace
}  // namespace cpu

bool cpu_has_avx512_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}

PeakResult measure_fma_peak(int threads, double seconds) {
  if (threads <= 0) threads = omp_get_max_threads();
  double flops = 0;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
  flops += HWY_DYNAMIC_DISPATCH(cpu::FmaChainsF32)(seconds);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  PeakResult r;
  r.threads = threads;
  r.lanes = HWY_DYNAMIC_DISPATCH(cpu::LanesF32)();
  r.gflops = flops / dt / 1e9;
  return r;
}

PeakResult measure_bf16_peak(int threads, double seconds) {
  PeakResult r;
  if (!cpu_has_avx512_bf16()) return r;
  if (threads <= 0) threads = omp_get_max_threads();
  double flops = 0;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
  flops += cpu::bf16_dot_chains(seconds);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.threads = threads;
  r.lanes = 32;
  r.gflops = flops / dt / 1e9;
  return r;
}

}  // namespace marin::kernels
#endif  // HWY_ONCE
