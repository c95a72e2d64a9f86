// The fp32 FMA peak of the machine at hand, measured rather than assumed: every thread runs
// independent chains of vector fused multiply-adds (enough of them to cover the FMA latency on
// two pipes) for a fixed time, and the FLOPs are counted. The vector width is the compiler's
// (GCC vector extensions: 8 floats on AVX2, 16 with AVX-512 enabled), so this measures what the
// kernels compiled into this binary can reach.
#include <immintrin.h>
#include <omp.h>

#include <chrono>

#include "kernels/kernels.hpp"

namespace marin::kernels {

namespace {
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
typedef float vfloat __attribute__((vector_size(kLanes * sizeof(float))));

// acc·b + a as one fused instruction (ISO C++ mode does not contract a*b+c by itself).
inline vfloat fma(vfloat acc, vfloat b, vfloat a) {
#if defined(__AVX512F__)
  return vfloat(_mm512_fmadd_ps(__m512(acc), __m512(b), __m512(a)));
#elif defined(__FMA__)
  return vfloat(_mm256_fmadd_ps(__m256(acc), __m256(b), __m256(a)));
#else
  return acc * b + a;
#endif
}
constexpr int kChains = 12;  // ≥ latency (4) × pipes (2), with slack

// Runs FMA chains for about `seconds`; returns the FLOPs done.
double fma_chains(double seconds) {
  vfloat acc[kChains];
  vfloat a, b;
  for (int l = 0; l < kLanes; ++l) a[l] = 1.0f + 1e-7f * float(l), b[l] = 0.999999f;
  for (int c = 0; c < kChains; ++c) acc[c] = a * float(c + 1) * 1e-3f;
  const auto t0 = std::chrono::steady_clock::now();
  double flops = 0;
  constexpr int kInner = 4096;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    for (int i = 0; i < kInner; ++i)
      for (int c = 0; c < kChains; ++c) acc[c] = fma(acc[c], b, a);
    flops += 2.0 * kLanes * kChains * kInner;
  }
  // Keep the result alive so the loop is not optimised away.
  volatile float sink = 0;
  for (int c = 0; c < kChains; ++c) sink = sink + acc[c][0];
  return flops;
}
}  // namespace

PeakResult measure_fma_peak(int threads, double seconds) {
  if (threads <= 0) threads = omp_get_max_threads();
  double flops = 0;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
  flops += fma_chains(seconds);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  PeakResult r;
  r.threads = threads;
  r.lanes = kLanes;
  r.gflops = flops / dt / 1e9;
  return r;
}

}  // namespace marin::kernels
