// The small kernels on model-sized shapes (8 x 512 tokens, d = 512). They are memory bound, so
// the counter that matters is GB/s (bytes read + written once); GFLOP/s is given where the FLOP
// count is meaningful. Run with OMP_NUM_THREADS=1 for per-core numbers.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "kernels/gates.hpp"
#include "kernels/kernels.hpp"
#include "kernels/optim.hpp"
#include "parallel/comm.hpp"
#include "parallel/exact_sum.hpp"

namespace mk = marin::kernels;

namespace {

std::vector<float> randv(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& e : v) e = d(g);
  return v;
}

void counters(benchmark::State& st, double bytes, double flops) {
  using C = benchmark::Counter;
  st.counters["GB/s"] = C(bytes * 1e-9, C::kIsIterationInvariantRate, C::kIs1000);
  if (flops > 0) st.counters["GFLOP/s"] = C(flops * 1e-9, C::kIsIterationInvariantRate, C::kIs1000);
}

constexpr int kRows = 8 * 512, kDim = 512;

void BM_RmsNormFwd(benchmark::State& st) {
  auto x = randv(size_t(kRows) * kDim, 1), g = randv(kDim, 2), y = x, r = randv(kRows, 3);
  for (auto _ : st) mk::rmsnorm_fwd(x.data(), g.data(), y.data(), r.data(), kRows, kDim, 1e-5);
  counters(st, 4.0 * 2 * kRows * kDim, 4.0 * kRows * kDim);
}
void BM_RmsNormBwd(benchmark::State& st) {
  auto x = randv(size_t(kRows) * kDim, 1), g = randv(kDim, 2), y = x, r = randv(kRows, 3);
  auto dy = randv(size_t(kRows) * kDim, 4), dx = x, dg = g;
  mk::rmsnorm_fwd(x.data(), g.data(), y.data(), r.data(), kRows, kDim, 1e-5);
  for (auto _ : st)
    mk::rmsnorm_bwd(dy.data(), x.data(), g.data(), r.data(), dx.data(), dg.data(), kRows, kDim);
  counters(st, 4.0 * 5 * kRows * kDim, 10.0 * kRows * kDim);
}

void BM_SwigluFwd(benchmark::State& st) {
  const size_t n = size_t(kRows) * 1024;
  auto a = randv(n, 1, 2.0f), b = randv(n, 2), h = a;
  for (auto _ : st) mk::swiglu_fwd(a.data(), b.data(), h.data(), n);
  counters(st, 4.0 * 3 * n, 0);
}
void BM_SwigluBwd(benchmark::State& st) {
  const size_t n = size_t(kRows) * 1024;
  auto a = randv(n, 1, 2.0f), b = randv(n, 2), dh = randv(n, 3), da = a, db = b;
  for (auto _ : st) mk::swiglu_bwd(dh.data(), a.data(), b.data(), da.data(), db.data(), n);
  counters(st, 4.0 * 5 * n, 0);
}

// GatedNorm's gates on a forward's normed input (kRows x kDim): out = r·σ(logit), then back.
void BM_SigmoidGateFwd(benchmark::State& st) {
  const size_t n = size_t(kRows) * kDim;
  auto r = randv(n, 1), logit = randv(n, 2, 2.0f), g = logit, out = r;
  for (auto _ : st) {
    std::copy(logit.begin(), logit.end(), g.begin());  // the kernel overwrites its logits
    mk::sigmoid_gate_fwd(r.data(), g.data(), out.data(), n);
  }
  counters(st, 4.0 * 6 * n, 0);  // the copy: 2 passes; the kernel: r, g in, g, out out
}
void BM_SigmoidGateBwd(benchmark::State& st) {
  const size_t n = size_t(kRows) * kDim;
  auto dout = randv(n, 1), r = randv(n, 2), g = randv(n, 3), dr = r, dl = r;
  for (auto _ : st) mk::sigmoid_gate_bwd(dout.data(), r.data(), g.data(), dr.data(), dl.data(), n);
  counters(st, 4.0 * 5 * n, 0);
}

// Σ x² over a cpu-small parameter vector's worth of floats (the hyperball radii, NS's norm).
void BM_SumSquares(benchmark::State& st) {
  const size_t n = size_t(st.range(0));
  auto x = randv(n, 1);
  for (auto _ : st) benchmark::DoNotOptimize(mk::sum_squares(x.data(), int64_t(n)));
  counters(st, 4.0 * n, 2.0 * n);
}

void BM_SconvFwd(benchmark::State& st) {
  const int B = 8, S = 512, C = kDim, k = 4;
  auto x = randv(size_t(B) * S * C, 1), w = randv(k * C, 2), y = x;
  std::vector<int32_t> seg(B * S);
  for (int i = 0; i < B * S; ++i) seg[i] = i / 200;
  for (auto _ : st) mk::sconv_fwd(x.data(), w.data(), seg.data(), y.data(), B, S, C, k);
  counters(st, 4.0 * 2 * B * S * C, 2.0 * k * B * S * C);
}
void BM_SconvBwd(benchmark::State& st) {
  const int B = 8, S = 512, C = kDim, k = 4;
  auto x = randv(size_t(B) * S * C, 1), w = randv(k * C, 2), dy = randv(size_t(B) * S * C, 3);
  auto dx = x, dw = w;
  std::vector<int32_t> seg(B * S);
  for (int i = 0; i < B * S; ++i) seg[i] = i / 200;
  for (auto _ : st)
    mk::sconv_bwd(dy.data(), x.data(), w.data(), seg.data(), dx.data(), dw.data(), B, S, C, k);
  counters(st, 4.0 * 3 * B * S * C, 4.0 * k * B * S * C);
}

void BM_Rope(benchmark::State& st) {
  const int B = 8, S = 512, H = 8, hd = 32;
  auto x = randv(size_t(B) * S * H * hd, 1);
  for (auto _ : st) mk::rope(x.data(), B, S, H, hd, H * hd, hd / 2, 10000.0, false);
  counters(st, 4.0 * 2 * B * S * H * hd / 2, 6.0 * B * S * H * hd / 4);
}

void BM_XentFwdBwd(benchmark::State& st) {
  const int rows = 1024, V = int(st.range(0));
  auto x = randv(size_t(rows) * V, 1, 3.0f), lse = randv(rows, 2), ce = lse, dl = x;
  std::vector<int32_t> labels(rows);
  for (int r = 0; r < rows; ++r) labels[r] = (r * 7919) % V;
  for (auto _ : st) {
    mk::xent_fwd(x.data(), labels.data(), lse.data(), ce.data(), rows, V);
    mk::xent_bwd(x.data(), labels.data(), lse.data(), dl.data(), rows, V, 1.0f / rows,
                 1e-4f / rows);
  }
  counters(st, 4.0 * 3 * double(rows) * V, 0);
}

// fp32 → bf16 (the bf16 GEMMs' inputs that no weight copy holds: activations, their gradients,
// Newton–Schulz's matrices): a micro-batch's activations of d = 512 (2 rows of 512 tokens).
void BM_ToBf16(benchmark::State& st) {
  const size_t n = size_t(st.range(0));
  auto x = randv(n, 1);
  std::vector<uint16_t> y(n);
  for (auto _ : st) mk::to_bf16(x.data(), y.data(), int64_t(n));
  counters(st, 6.0 * n, 0);
}

// The same conversion as a GEMM makes it, by rows: a 128 × 128 matrix (Newton–Schulz of an expert,
// an expert's block of rows).
void BM_ToBf16Rows(benchmark::State& st) {
  const int64_t rows = st.range(0), cols = st.range(1);
  auto x = randv(size_t(rows * cols), 1);
  std::vector<uint16_t> y(x.size());
  for (auto _ : st) mk::to_bf16_rows(x.data(), rows, cols, cols, y.data());
  counters(st, 6.0 * double(rows * cols), 0);
}

}  // namespace

// The exact gradient sum of one process (parallel::ExactSum::reduce): four micro-batch partials of
// a 4M-element gradient in 16 tensors, as a training step sums them. Bytes: the partials read
// twice (maximum, fixed-point sum), the integer sums written and read once, the result written.
void BM_ExactSum(benchmark::State& st) {
  constexpr int64_t n = int64_t(1) << 22, tensors = 16, parts = 4;
  std::vector<std::vector<float>> grads;
  for (int p = 0; p < parts; ++p) grads.push_back(randv(size_t(n), unsigned(10 + p), 1e-3f));
  std::vector<marin::parallel::Segment> segs;
  for (int64_t t = 0; t < tensors; ++t) segs.push_back({t * (n / tensors), n / tensors});
  auto comm = marin::parallel::make_local_comm();
  marin::parallel::ExactSum sum(segs, n, {{{0, n}, nullptr, {{0, n}}}});
  std::vector<marin::parallel::Partial> partials;
  for (auto& g : grads) partials.push_back({g.data(), {0, n}});
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : st) benchmark::DoNotOptimize(sum.reduce(partials, parts, *comm, out.data()));
  counters(st, double(n) * (2 * parts * 4 + 8 + 8 + 4), 0);
}

// The products of a cpu-small layer at one micro-batch (2 × 512 rows, d = 256, the shared
// experts' and latent width 128), as the model calls them: forward Y = X·W, input gradient
// dX = dY·Wᵀ, weight gradient dW = Xᵀ·dY (K = the 1,024 rows). Args: ta, tb, M, N, K, bf16.
// Without a WeightCopy, a bf16 product converts both inputs at the call, as for activations.
void BM_Gemm(benchmark::State& st) {
  const bool ta = st.range(0), tb = st.range(1), bf16 = st.range(5);
  const int64_t M = st.range(2), N = st.range(3), K = st.range(4);
  std::string why;
  if (bf16 && !mk::bf16_gemm_supported(&why)) return st.SkipWithError(why.c_str());
  const mk::DtypeScope dtype(bf16 ? mk::Dtype::bf16 : mk::Dtype::fp32);
  const auto A = randv(size_t(M * K), 1), B = randv(size_t(K * N), 2);
  std::vector<float> C(size_t(M * N));
  for (auto _ : st) {
    mk::gemm<float>(ta, tb, M, N, K, 1.0f, A.data(), ta ? M : K, B.data(), tb ? K : N, 0.0f,
                    C.data(), N);
    benchmark::DoNotOptimize(C.data());
  }
  counters(st, 4.0 * double(M * K + K * N + M * N), 2.0 * double(M * N * K));
}

BENCHMARK(BM_RmsNormFwd)->Unit(benchmark::kMicrosecond)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_RmsNormBwd)->Unit(benchmark::kMicrosecond)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_SwigluFwd)->Unit(benchmark::kMicrosecond)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_SwigluBwd)->Unit(benchmark::kMicrosecond)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_SigmoidGateFwd)->Unit(benchmark::kMicrosecond)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_SigmoidGateBwd)->Unit(benchmark::kMicrosecond)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_SumSquares)
    ->Arg(1 << 20)
    ->Arg(1 << 24)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2)
    ->UseRealTime();
BENCHMARK(BM_SconvFwd)->Unit(benchmark::kMicrosecond)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_SconvBwd)->Unit(benchmark::kMicrosecond)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_Rope)->Unit(benchmark::kMicrosecond)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_ExactSum)->Unit(benchmark::kMillisecond)->MinTime(0.5)->UseRealTime();
BENCHMARK(BM_ToBf16)
    ->Arg(2 * 512 * kDim)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2)
    ->UseRealTime();
BENCHMARK(BM_ToBf16Rows)
    ->Args({128, 128})
    ->Args({1024, 256})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2)
    ->UseRealTime();
BENCHMARK(BM_XentFwdBwd)->Arg(32768)->Unit(benchmark::kMicrosecond)->MinTime(0.2)->UseRealTime();
BENCHMARK(BM_Gemm)
    ->ArgNames({"ta", "tb", "M", "N", "K", "bf16"})
    ->ArgsProduct({{0}, {0}, {1024}, {128}, {256}, {0, 1}})  // forward
    ->ArgsProduct({{0}, {1}, {1024}, {256}, {128}, {0, 1}})  // input gradient
    ->ArgsProduct({{1}, {0}, {256}, {128}, {1024}, {0, 1}})  // weight gradient
    ->ArgsProduct({{1}, {0}, {256}, {256}, {1024}, {0, 1}})  // attention's weight gradient
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2)
    ->UseRealTime();
