// Newton–Schulz and optimizer-step micro-benchmarks on cpu-small shapes. GFLOP/s counts the three
// GEMMs per iteration (ns_flops) over real time (CPU time under-reports on shared vCPUs). Run
// single-threaded with OMP_NUM_THREADS=1.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "core/rng.hpp"
#include "kernels/kernels.hpp"
#include "kernels/optim.hpp"
#include "model/params.hpp"
#include "optim/muonh.hpp"
#include "optim/newton_schulz.hpp"
#include "optim/optimizer.hpp"

namespace {

using namespace marin::optim;

std::vector<float> randn(int64_t n, uint64_t seed) {
  marin::Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// args: rows, cols, number of matrices. Products in fp32 (the default), or in bf16 as
// `--ns-dtype compute` runs them under `--dtype bf16` (where the CPU has avx512_bf16).
void newton_schulz_in(benchmark::State& st, marin::kernels::Precision products) {
  const int64_t r = st.range(0), c = st.range(1), E = st.range(2);
  auto U = randn(E * r * c, 1);
  std::vector<float> O(U.size()), ws(ns_batched_workspace_size(E, r, c));
  for (auto _ : st) {
    newton_schulz_batched<float>(U.data(), O.data(), E, r, c, ws.data(), products);
    benchmark::DoNotOptimize(O.data());
  }
  st.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(E) * ns_flops(r, c) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
void BM_NewtonSchulz(benchmark::State& st) {
  newton_schulz_in(st, marin::kernels::Precision::fp32);
}
void BM_NewtonSchulzBf16(benchmark::State& st) {
  std::string why;
  if (!marin::kernels::bf16_gemm_supported(&why)) return st.SkipWithError(why.c_str());
  marin::kernels::DtypeScope bf16(marin::kernels::Dtype::bf16);
  newton_schulz_in(st, marin::kernels::Precision::compute);
}
void ns_shapes(benchmark::internal::Benchmark* b) {
  for (auto args : std::vector<std::vector<int64_t>>{
           {256, 256, 1}, {256, 384, 1}, {384, 256, 1}, {128, 128, 32}, {256, 32, 1}})
    b->Args(args);
  b->Unit(benchmark::kMicrosecond)->MinTime(0.3)->UseRealTime();
}
BENCHMARK(BM_NewtonSchulz)->Apply(ns_shapes);
BENCHMARK(BM_NewtonSchulzBf16)->Apply(ns_shapes);

// The whole MuonH step (momentum, NS, hyperball) for the same shapes.
void BM_MuonHUpdate(benchmark::State& st) {
  const int64_t r = st.range(0), c = st.range(1), E = st.range(2);
  auto P = randn(E * r * c, 2), G = randn(E * r * c, 3);
  std::vector<float> M(P.size()), ws(muonh_workspace_size(E, r, c));
  for (auto _ : st) {
    muonh_update<float>(P.data(), G.data(), M.data(), E, r, c, 1e-3, RadiusScope::kLayer,
                        ws.data());
    benchmark::DoNotOptimize(P.data());
  }
  st.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(E) * ns_flops(r, c) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MuonHUpdate)
    ->Args({256, 256, 1})
    ->Args({128, 128, 32})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.3)
    ->UseRealTime();

// A whole cpu-small model's update (Optimizer::step: MuonH, AdamH and Adam over 20.6 M
// parameters), as the trainer's optimizer.update runs it, in fp32 (/0) and with Newton–Schulz's
// products in bf16 (/1, the default of a bf16 run); OMP_NUM_THREADS sets the threads.
void BM_OptimizerStep(benchmark::State& st) {
  namespace mk = marin::kernels;
  const bool bf16 = st.range(0) == 1;
  std::string why;
  if (bf16 && !mk::bf16_gemm_supported(&why)) return st.SkipWithError(why.c_str());
  const mk::DtypeScope dtype(bf16 ? mk::Dtype::bf16 : mk::Dtype::fp32);
  const marin::ParamTable t(marin::ModelConfig::preset("cpu-small"));
  marin::OptimConfig oc;
  oc.muonh_lr = 0.02, oc.adam_lr = 1e-3, oc.total_steps = 1000;
  marin::Optimizer opt(t, oc);
  std::vector<float> P(size_t(t.total()));
  t.initialize(P.data(), 1);
  const auto G = randn(t.total(), 6);
  int64_t step = 10;
  for (auto _ : st) {
    opt.step(P.data(), G.data(), step++);
    benchmark::DoNotOptimize(P.data());
  }
}
BENCHMARK(BM_OptimizerStep)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->UseRealTime();

// MuonH's Nesterov momentum, the largest element-wise kernel of a step, over a whole cpu-small
// model's state (29.6 M elements) and over one expert stack (512 K): memory-bound (GB/s: bytes
// read + written once).
void BM_NesterovMomentum(benchmark::State& st) {
  const int64_t n = st.range(0);
  auto G = randn(n, 4), M = randn(n, 5);
  std::vector<float> U(size_t(n), 0.0f);
  for (auto _ : st) {
    marin::kernels::nesterov_momentum(G.data(), M.data(), U.data(), n, 0.95f);
    benchmark::DoNotOptimize(U.data());
  }
  st.counters["GB/s"] =
      benchmark::Counter(double(n) * 16 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_NesterovMomentum)
    ->Arg(524288)
    ->Arg(29'600'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
