// Attention forward/backward on the model's shape (B=8, S=512, H=8, hd=32, 2 stored kv heads):
// local layers (kv_used 2, window 256) and global layers (kv_used 1, full causal).
// FLOPs counted as 4*hd per visible (query, key) pair forward (QK^T and PV), 10*hd backward
// (QK^T recompute, dO V^T, dV, dK, dQ) = 2.5x forward. Run with OMP_NUM_THREADS=1 for per-core
// numbers; fp32 FMA peak is ~117 GFLOP/s per core on this machine. bf16=1: the products as bf16
// dot products (compute dtype bf16, kernels.hpp's attention_bf16_supported; skipped without
// avx512_bf16); BM_Bf16DotPeak is that instruction's peak.
#include <benchmark/benchmark.h>

#include <random>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <vector>

#include "kernels/kernels.hpp"

namespace mk = marin::kernels;

namespace {

struct Setup {
  mk::AttnShape s;
  std::vector<float> q, k, v, out, lse, dout, dq, dk, dv;
  std::vector<int32_t> seg;
  double pairs = 0;
  Setup(int kv_used, int window, bool packed, int B) {
    s = mk::AttnShape{B, 512, 8, kv_used, 2, 32, window};
    const size_t nq = size_t(s.B) * s.S * s.H * s.hd, nkv = size_t(s.B) * s.S * s.kv_stored * s.hd;
    std::mt19937 g(1);
    std::normal_distribution<float> d;
    auto fill = [&](std::vector<float>& x, size_t n) {
      x.resize(n);
      for (auto& e : x) e = d(g);
    };
    fill(q, nq), fill(k, nkv), fill(v, nkv), fill(dout, nq);
    out.resize(nq), dq.resize(nq), dk.resize(nkv), dv.resize(nkv);
    lse.resize(size_t(s.B) * s.H * s.S);
    seg.resize(size_t(s.B) * s.S);
    for (int b = 0; b < s.B; ++b)  // packed: documents of 200 tokens
      for (int t = 0; t < s.S; ++t) seg[size_t(b) * s.S + t] = packed ? t / 200 : 0;
    for (int b = 0; b < s.B; ++b)
      for (int t = 0; t < s.S; ++t)
        for (int j = 0; j <= t; ++j)
          pairs += seg[b * s.S + j] == seg[b * s.S + t] && (window == 0 || t - window < j);
    pairs *= s.H;
  }
};

void set_counters(benchmark::State& st, double flops) {
  st.counters["GFLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

// Whether the compute dtype of one benchmark (its 5th argument) runs here; bf16 needs the CPU.
bool dtype_runs(benchmark::State& st) {
  if (st.range(4) == 0) return true;
  if (mk::bf16_gemm_supported() && mk::attention_bf16_supported()) return true;
  st.SkipWithError("bf16 attention needs avx512_bf16");
  return false;
}

void BM_AttnFwd(benchmark::State& st) {
  if (!dtype_runs(st)) return;
  mk::DtypeScope dt(st.range(4) ? mk::Dtype::bf16 : mk::Dtype::fp32);
  Setup u(int(st.range(0)), int(st.range(1)), st.range(2) != 0, int(st.range(3)));
  for (auto _ : st) {
    mk::attention_fwd(u.s, u.q.data(), u.k.data(), u.v.data(), u.seg.data(), u.out.data(),
                      u.lse.data());
    benchmark::DoNotOptimize(u.out.data());
  }
  set_counters(st, 4.0 * u.s.hd * u.pairs * 1e-9);
}

void BM_AttnBwd(benchmark::State& st) {
  if (!dtype_runs(st)) return;
  mk::DtypeScope dt(st.range(4) ? mk::Dtype::bf16 : mk::Dtype::fp32);
  Setup u(int(st.range(0)), int(st.range(1)), st.range(2) != 0, int(st.range(3)));
  mk::attention_fwd(u.s, u.q.data(), u.k.data(), u.v.data(), u.seg.data(), u.out.data(),
                    u.lse.data());
  for (auto _ : st) {
    mk::attention_bwd(u.s, u.q.data(), u.k.data(), u.v.data(), u.seg.data(), u.out.data(),
                      u.lse.data(), u.dout.data(), u.dq.data(), u.dk.data(), u.dv.data());
    benchmark::DoNotOptimize(u.dq.data());
  }
  set_counters(st, 10.0 * u.s.hd * u.pairs * 1e-9);
}

// args: kv_used, window, packed, B, bf16. B = 1 is the same per-(b, head) work in calls short
// enough to run between preemptions on the shared vCPUs: compare its best repetition with
// BM_FmaPeak (fp32) or BM_Bf16DotPeak (bf16).
void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"kv_used", "window", "packed", "B", "bf16"});
  for (int bf16 : {0, 1}) {
    b->Args({2, 256, 0, 8, bf16})->Args({1, 0, 0, 8, bf16})->Args({1, 0, 1, 8, bf16});
    b->Args({2, 256, 0, 1, bf16})->Args({1, 0, 0, 1, bf16});
  }
  b->Unit(benchmark::kMillisecond)->MinTime(0.3)->UseRealTime();
}

#if defined(__x86_64__)
// Calibration: independent zmm FMA chains, the machine's fp32 peak under the same timing
// conditions as the kernels (the shared vCPUs make absolute numbers noisy). Compiled for AVX-512
// whatever the build's baseline, run where the CPU has it.
__attribute__((target("avx512f"))) void fma_chains(benchmark::State& st) {
  constexpr int kAcc = 12;
  constexpr long kIters = 1 << 16;  // ~0.1 ms: fits between preemptions
  for (auto _ : st) {
    __m512 acc[kAcc];
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(float(i));
    const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-4f);
    for (long it = 0; it < kIters; ++it)
      for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    for (int i = 0; i < kAcc; ++i) benchmark::DoNotOptimize(acc[i]);
  }
  set_counters(st, 32.0 * kAcc * kIters * 1e-9);
}
void BM_FmaPeak(benchmark::State& st) {
  if (!__builtin_cpu_supports("avx512f")) return st.SkipWithError("no avx512f");
  fma_chains(st);
}
BENCHMARK(BM_FmaPeak)->Unit(benchmark::kMillisecond)->MinTime(0.3)->UseRealTime();

// BM_FmaPeak's twin for vdpbf16ps (4 FLOPs a lane: two products and their two sums), where the CPU
// has it.
__attribute__((target("avx512f,avx512bf16"))) void bf16_dot_chains(benchmark::State& st) {
  constexpr int kAcc = 12;
  constexpr long kIters = 1 << 16;
  for (auto _ : st) {
    __m512 acc[kAcc];
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(float(i));
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
    for (long it = 0; it < kIters; ++it)
      for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, a);
    for (int i = 0; i < kAcc; ++i) benchmark::DoNotOptimize(acc[i]);
  }
  set_counters(st, 64.0 * kAcc * kIters * 1e-9);
}
void BM_Bf16DotPeak(benchmark::State& st) {
  if (!__builtin_cpu_supports("avx512bf16")) return st.SkipWithError("no avx512_bf16");
  bf16_dot_chains(st);
}
BENCHMARK(BM_Bf16DotPeak)->Unit(benchmark::kMillisecond)->MinTime(0.3)->UseRealTime();
#endif

}  // namespace

BENCHMARK(BM_AttnFwd)->Apply(shapes);
BENCHMARK(BM_AttnBwd)->Apply(shapes);
