// Optimizer math (recipe §5): Newton–Schulz against a literal reference and against the polar
// factor from a double-precision LAPACK SVD, the hyperball invariant of MuonH / AdamH, Adam against
// a hand-computed example, and the schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "kernels/kernels.hpp"
#include "kernels/optim.hpp"
#include "kernels/threads.hpp"
#include "model/params.hpp"
#include "optim/adam.hpp"
#include "optim/muonh.hpp"
#include "optim/newton_schulz.hpp"
#include "optim/optimizer.hpp"
#include "optim/schedule.hpp"

// OpenBLAS bundles LAPACK; lapacke.h may be missing, so declare the Fortran symbol (with the
// hidden string-length arguments gfortran passes).
extern "C" void dgesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, double* a,
                        const int* lda, double* s, double* u, const int* ldu, double* vt,
                        const int* ldvt, double* work, const int* lwork, int* info, size_t, size_t);

namespace {

using namespace marin::optim;
using i64 = int64_t;

std::vector<double> randn(i64 n, uint64_t seed, double scale = 1.0) {
  marin::Rng rng(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = scale * rng.normal();
  return v;
}

template <class T, class S>
std::vector<T> cast(const std::vector<S>& v) {
  return std::vector<T>(v.begin(), v.end());
}

double norm(const double* x, i64 n) {
  double s = 0;
  for (i64 i = 0; i < n; ++i) s += x[i] * x[i];
  return std::sqrt(s);
}
template <class T>
double norm(const std::vector<T>& v) {
  double s = 0;
  for (T x : v) s += double(x) * double(x);
  return std::sqrt(s);
}

// Thin SVD of a row-major rows x cols matrix: A = L·diag(s)·Rᵀ with L [rows,k], R [cols,k]
// (row-major), k = min(rows, cols), s descending.
struct Svd {
  std::vector<double> L, s, R;
  i64 k;
};
Svd svd(const std::vector<double>& A, i64 rows, i64 cols) {
  // Row-major A is column-major Aᵀ (cols x rows): Aᵀ = U'·S·V'ᵀ, so A = V'·S·U'ᵀ.
  int m = int(cols), n = int(rows), k = int(std::min(rows, cols));
  std::vector<double> a(A), s(k), u(size_t(m) * k), vt(size_t(k) * n);
  int lwork = -1, info = 0;
  double wq = 0;
  dgesvd_("S", "S", &m, &n, a.data(), &m, s.data(), u.data(), &m, vt.data(), &k, &wq, &lwork, &info,
          1, 1);
  lwork = int(wq);
  std::vector<double> work(lwork);
  dgesvd_("S", "S", &m, &n, a.data(), &m, s.data(), u.data(), &m, vt.data(), &k, work.data(),
          &lwork, &info, 1, 1);
  EXPECT_EQ(info, 0);
  Svd r{std::vector<double>(size_t(rows) * k), s, std::vector<double>(size_t(cols) * k), k};
  for (i64 i = 0; i < rows; ++i)  // L = V' (rows x k): V'(i,l) = vt(l,i) column-major
    for (i64 l = 0; l < k; ++l) r.L[i * k + l] = vt[l + i * k];
  for (i64 j = 0; j < cols; ++j)  // R = U' (cols x k): U'(j,l) = u(j,l) column-major
    for (i64 l = 0; l < k; ++l) r.R[j * k + l] = u[j + l * m];
  return r;
}

// The recipe's Newton–Schulz written literally, in double, with naive loops and explicit
// transposes.
std::vector<double> ns_reference(const std::vector<double>& U, i64 rows, i64 cols) {
  double nrm = norm(U) + 1e-8;
  bool tr = rows > cols;
  i64 m = tr ? cols : rows, n = tr ? rows : cols;
  std::vector<double> X(m * n);
  for (i64 i = 0; i < rows; ++i)
    for (i64 j = 0; j < cols; ++j) (tr ? X[j * n + i] : X[i * n + j]) = U[i * cols + j] / nrm;
  for (const auto& [a, b, c] : kNsCoeffs) {
    std::vector<double> A(m * m, 0.0), B(m * m, 0.0), Y(m * n, 0.0);
    for (i64 i = 0; i < m; ++i)
      for (i64 j = 0; j < m; ++j)
        for (i64 l = 0; l < n; ++l) A[i * m + j] += X[i * n + l] * X[j * n + l];
    for (i64 i = 0; i < m; ++i)
      for (i64 j = 0; j < m; ++j) {
        double aa = 0;
        for (i64 l = 0; l < m; ++l) aa += A[i * m + l] * A[l * m + j];
        B[i * m + j] = b * A[i * m + j] + c * aa;
      }
    for (i64 i = 0; i < m; ++i)
      for (i64 j = 0; j < n; ++j) {
        double bx = 0;
        for (i64 l = 0; l < m; ++l) bx += B[i * m + l] * X[l * n + j];
        Y[i * n + j] = a * X[i * n + j] + bx;
      }
    X = Y;
  }
  std::vector<double> O(rows * cols);
  for (i64 i = 0; i < rows; ++i)
    for (i64 j = 0; j < cols; ++j) O[i * cols + j] = tr ? X[j * n + i] : X[i * n + j];
  return O;
}

template <class T>
std::vector<T> run_ns(const std::vector<T>& U, i64 rows, i64 cols) {
  std::vector<T> O(U.size()), ws(ns_workspace_size(rows, cols), T(123));  // dirty workspace
  newton_schulz<T>(U.data(), O.data(), rows, cols, ws.data());
  return O;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
    m = std::max(m, std::abs(b[i]));
  }
  return d / std::max(m, 1e-300);
}

struct Shape {
  i64 rows, cols;
};
const Shape kShapes[] = {{64, 64},   {48, 96},   {96, 48}, {128, 128},
                         {256, 384}, {384, 256}, {256, 32}};

TEST(NewtonSchulz, MatchesLiteralRecipeInDouble) {
  for (auto [r, c] : {Shape{8, 8}, Shape{5, 13}, Shape{13, 5}, Shape{32, 48}, Shape{48, 32}}) {
    auto U = randn(r * c, 7 + r * 100 + c, 0.3);
    auto ref = ns_reference(U, r, c);
    auto got = run_ns<double>(U, r, c);
    EXPECT_LT(max_rel_diff(got, ref), 1e-12) << r << "x" << c;
    auto gotf = cast<double>(run_ns<float>(cast<float>(U), r, c));
    EXPECT_LT(max_rel_diff(gotf, ref), 2e-4) << r << "x" << c << " float";
  }
}

TEST(NewtonSchulz, InPlaceAndBatched) {
  const i64 E = 5, r = 24, c = 40;
  auto U = cast<float>(randn(E * r * c, 11));
  std::vector<float> ws(ns_batched_workspace_size(E, r, c));
  std::vector<float> O(U.size()), inplace = U;
  newton_schulz_batched<float>(U.data(), O.data(), E, r, c, ws.data());
  newton_schulz_batched<float>(inplace.data(), inplace.data(), E, r, c, ws.data());
  EXPECT_EQ(O, inplace);
  for (i64 e = 0; e < E; ++e) {  // each expert on its own: equal to the single-matrix call
    std::vector<float> one(U.begin() + e * r * c, U.begin() + (e + 1) * r * c);
    auto o1 = run_ns<float>(one, r, c);
    EXPECT_TRUE(std::equal(o1.begin(), o1.end(), O.begin() + e * r * c)) << "expert " << e;
  }
  // scale-invariant: NS(5·U) == NS(U) up to rounding (normalised first)
  std::vector<float> U5(U.begin(), U.begin() + r * c), U1 = U5;
  for (auto& x : U5) x *= 5.0f;
  auto a = cast<double>(run_ns<float>(U1, r, c)), b = cast<double>(run_ns<float>(U5, r, c));
  EXPECT_LT(max_rel_diff(a, b), 1e-5);
}

// A stack spread over two threads computes each matrix single-threaded: the same bits as one
// thread, matrix by matrix, whatever thread ran it (a resume at another thread count, or a
// multi-rank run at one thread a rank, keeps its Newton–Schulz bits).
TEST(NewtonSchulz, BatchedIsTheSameAtEveryThreadCount) {
  const int before = marin::kernels::compute_threads();
  const bool chosen = marin::kernels::compute_threads_chosen();
  for (auto [E, r, c] : {std::tuple<i64, i64, i64>{7, 24, 40}, {5, 128, 128}, {3, 96, 32}}) {
    auto U = cast<float>(randn(E * r * c, 13));
    std::vector<std::vector<float>> out;
    for (int threads : {1, 2, 3}) {
      marin::kernels::set_compute_threads(threads, true);
      EXPECT_EQ(marin::kernels::task_slots(E), std::min<i64>(E, threads));
      std::vector<float> ws(ns_batched_workspace_size(E, r, c), 7.0f), O(U.size());
      newton_schulz_batched<float>(U.data(), O.data(), E, r, c, ws.data());
      EXPECT_EQ(marin::kernels::compute_threads(), threads) << "the tasks' one thread leaked out";
      out.push_back(O);
    }
    EXPECT_EQ(out[0], out[1]) << E << "x" << r << "x" << c << " at 1 and 2 threads";
    EXPECT_EQ(out[0], out[2]) << E << "x" << r << "x" << c << " at 1 and 3 threads";
  }
  marin::kernels::set_compute_threads(before, chosen);
}

// The whole model's update (optim/optimizer.hpp) runs its single matrices as tasks, one per
// thread, beside the expert stacks' own tasks: every thread count writes the one-thread bits, and
// a matrix updated as a task is its own muonh_update, bit for bit.
TEST(Optimizer, EveryThreadCountWritesTheOneThreadBits) {
  namespace mk = marin::kernels;
  const int before = mk::compute_threads();
  const bool chosen = mk::compute_threads_chosen();
  const marin::ModelConfig c = marin::ModelConfig::preset("tiny");
  const marin::ParamTable t(c);
  marin::OptimConfig oc;
  oc.muonh_lr = 0.02, oc.adam_lr = 1e-3, oc.total_steps = 100;
  std::vector<float> P0(size_t(t.total()));
  t.initialize(P0.data(), 3);
  const auto G = cast<float>(randn(t.total(), 17));
  // fp32, and bf16 where the CPU has it: Newton–Schulz's products then run on oneDNN's matmul,
  // whose primitives made at one thread count must not serve another (kernels/cpu/gemm.cpp).
  std::vector<mk::Dtype> dtypes = {mk::Dtype::fp32};
  if (mk::bf16_gemm_supported()) dtypes.push_back(mk::Dtype::bf16);
  for (mk::Dtype d : dtypes) {
    SCOPED_TRACE(mk::dtype_name(d));
    const mk::DtypeScope dtype(d);
    std::vector<std::vector<float>> out;
    for (int threads : {1, 2, 3, 2, 1}) {
      mk::set_compute_threads(threads, true);
      marin::Optimizer opt(t, oc);
      auto P = P0;
      for (int64_t step : {10, 11}) opt.step(P.data(), G.data(), step);
      EXPECT_EQ(mk::compute_threads(), threads) << "the tasks' one thread leaked out";
      out.push_back(P);
    }
    for (size_t i = 1; i < out.size(); ++i) EXPECT_EQ(out[0], out[i]) << "run " << i;
    mk::set_compute_threads(1, true);
    const marin::Optimizer opt(t, oc);
    for (const char* name : {"layers.0.attn.wq", "layers.1.moe.latent_down"}) {
      const marin::ParamInfo& p = t.at(name);
      auto P = P0;
      std::vector<float> M(size_t(p.size), 0.0f),
          ws(size_t(muonh_workspace_size(1, p.rows(), p.cols())));
      for (int64_t step : {10, 11})
        muonh_update(P.data() + p.offset, G.data() + p.offset, M.data(), 1, p.rows(), p.cols(),
                     opt.rates(step).muonh, RadiusScope::kLayer, ws.data(), kMuonBeta, nullptr,
                     oc.ns_products());
      EXPECT_TRUE(std::equal(P.begin() + p.offset, P.begin() + p.offset + p.size,
                             out[0].begin() + p.offset))
          << name;
    }
  }
  mk::set_compute_threads(before, chosen);
}

// The element-wise kernels of the optimizer and of the trainer's gradient buffers split their
// elements over the compute threads: every thread count writes the one-thread bits, every element
// and nothing past the end (sizes below, at and beyond the size that turns threading on).
TEST(ElementWise, EveryThreadCountWritesTheOneThreadBits) {
  namespace mk = marin::kernels;
  const int before = mk::compute_threads();
  const bool chosen = mk::compute_threads_chosen();
  const mk::AdamCoeffs k{0.9, 0.95, 0.1, 0.05, 1.2, 1.1, 1e-8};
  for (i64 n : {i64(5), i64(1) << 15, (i64(1) << 17) + 13}) {
    const auto G = cast<float>(randn(n, 21)), P0 = cast<float>(randn(n, 22));
    const auto M0 = cast<float>(randn(n, 23));
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2, 3}) {
      mk::set_compute_threads(threads, true);
      std::vector<float> P = P0, M = M0, V(size_t(n) + 1, 0.25f), U(size_t(n) + 1, -7.0f);
      mk::nesterov_momentum(G.data(), M.data(), U.data(), n, 0.95f);
      mk::adam_direction(k, G.data(), M.data(), V.data(), U.data(), n);
      mk::adam_update(k, P.data(), G.data(), M.data(), V.data(), n, 1e-2, 0.1);
      mk::axpy(0.5f, U.data(), P.data(), n);
      mk::scale_to(P.data(), 3.0f, U.data(), n);
      EXPECT_EQ(U[size_t(n)], -7.0f) << "wrote past the end";
      std::vector<float> Z = P;
      mk::copy(U.data(), Z.data(), n);
      EXPECT_EQ(Z, std::vector<float>(U.begin(), U.begin() + n));
      mk::zero(Z.data(), n - 1);
      EXPECT_EQ(std::count(Z.begin(), Z.end(), 0.0f), n - 1 + (Z.back() == 0.0f));
      EXPECT_EQ(Z.back(), U[size_t(n - 1)]) << "zeroed past the end";
      P.insert(P.end(), M.begin(), M.end());
      P.insert(P.end(), U.begin(), U.end());
      runs.push_back(P);
    }
    // The definition, element by element (one thread's blocks are the plain loop).
    const float b1 = float(k.b1), c1 = float(k.c1), m1 = 0.95f * M0[0] + G[0];
    const float m2 = b1 * m1 + c1 * G[0];  // M after the momentum and two Adam steps
    EXPECT_EQ(runs[0][size_t(n)], b1 * m2 + c1 * G[0]);
    EXPECT_EQ(runs[0], runs[1]) << "n " << n << " at 1 and 2 threads";
    EXPECT_EQ(runs[0], runs[2]) << "n " << n << " at 1 and 3 threads";
  }
  mk::set_compute_threads(before, chosen);
}

// --ns-dtype compute: Newton–Schulz's products in the run's compute dtype. With bf16 (here its
// emulation, the same bf16 inputs and fp32 sums on any CPU) the result differs from the fp32 one
// by bf16 rounding only: within 2 % of its largest entry on every shape, tall and wide; with an
// fp32 compute dtype, or products left at fp32, it is the fp32 result bit for bit.
TEST(NewtonSchulz, ProductsInTheComputeDtypeStayWithinBf16Rounding) {
  for (auto [r, c] : kShapes) {
    const auto U = cast<float>(randn(r * c, 500 + r + c));
    std::vector<float> ws(ns_workspace_size(r, c)), fp32(U.size()), same(U.size()), bf16(U.size()),
        pinned(U.size());
    newton_schulz<float>(U.data(), fp32.data(), r, c, ws.data());
    newton_schulz<float>(U.data(), same.data(), r, c, ws.data(),
                         marin::kernels::Precision::compute);
    EXPECT_EQ(same, fp32) << r << "x" << c << ": an fp32 compute dtype changes nothing";
    {
      const marin::kernels::DtypeScope emulated(marin::kernels::Dtype::bf16_emulated);
      newton_schulz<float>(U.data(), bf16.data(), r, c, ws.data(),
                           marin::kernels::Precision::compute);
      newton_schulz<float>(U.data(), pinned.data(), r, c, ws.data());
    }
    EXPECT_EQ(pinned, fp32) << r << "x" << c << ": fp32 products ignore the compute dtype";
    EXPECT_NE(bf16, fp32) << r << "x" << c << ": the bf16 products were not used";
    EXPECT_LT(max_rel_diff(cast<double>(bf16), cast<double>(fp32)), 0.02) << r << "x" << c;
  }
}

// O = NS(U) should approximate the polar factor Q = L·Rᵀ of U = L·S·Rᵀ: same singular vectors, with
// each singular value σ mapped to p(x), x = σ/(‖U‖_F + 1e-8) ≤ 1, p the composition of the five
// quintics. Scanning p over x in [1e-6, 1] (float64) gives: max p = 1.1450 (at x ≈ 0.0041),
// p(1) = 0.9783, p ∈ [0.9778, 1.1450] for x ≥ 0.003 and p ∈ [0.9778, 1.0318] for x ≥ 0.01; below
// x ≈ 0.0015 p falls under 0.68 (5 iterations cannot lift tiny singular values: p(x) ≈ 493·x).
// The asserted bands are those, with 3e-3 of float slack. Measures the singular values of O (its
// own SVD), the diagonal of Lᵀ·O·R (how each of U's directions is scaled), the off-diagonal
// leakage, and the distance to Q.
TEST(NewtonSchulz, ApproximatesPolarFactor) {
  double band_lo = 1e9, band_hi = 0, band_lo_cond = 1e9, band_hi_cond = 0;
  for (auto [r, c] : kShapes) {
    auto U = randn(r * c, 1000 + r * 7 + c);
    auto sv = svd(U, r, c);
    const i64 k = sv.k;
    auto O = cast<double>(run_ns<float>(cast<float>(U), r, c));
    // D = Lᵀ·O·R
    std::vector<double> OR(r * k, 0.0), D(k * k, 0.0);
    for (i64 i = 0; i < r; ++i)
      for (i64 j = 0; j < c; ++j)
        for (i64 l = 0; l < k; ++l) OR[i * k + l] += O[i * c + j] * sv.R[j * k + l];
    for (i64 i = 0; i < r; ++i)
      for (i64 a = 0; a < k; ++a)
        for (i64 l = 0; l < k; ++l) D[a * k + l] += sv.L[i * k + a] * OR[i * k + l];
    const double fro = norm(U) + 1e-8;
    double off = 0, dlo = 1e9, dhi = 0, dlo_cond = 1e9, dhi_cond = 0;
    for (i64 a = 0; a < k; ++a)
      for (i64 l = 0; l < k; ++l)
        if (a != l) off = std::max(off, std::abs(D[a * k + l]));
    for (i64 a = 0; a < k; ++a) {
      double d = D[a * k + a];
      dlo = std::min(dlo, d);
      dhi = std::max(dhi, d);
      const double x = sv.s[a] / fro;
      if (x >= 0.003) {
        EXPECT_GT(d, 0.9778 - 3e-3) << r << "x" << c << " x=" << x;
        EXPECT_LT(d, 1.1450 + 3e-3) << r << "x" << c << " x=" << x;
      }
      if (x >= 0.01) {
        EXPECT_LT(d, 1.0318 + 3e-3) << r << "x" << c << " x=" << x;
        dlo_cond = std::min(dlo_cond, d);
        dhi_cond = std::max(dhi_cond, d);
      }
    }
    // O's own singular values
    auto so = svd(O, r, c).s;
    double slo = so.back(), shi = so.front();
    // distance to the polar factor Q = L·Rᵀ
    double dq = 0;
    for (i64 i = 0; i < r; ++i)
      for (i64 j = 0; j < c; ++j) {
        double q = 0;
        for (i64 l = 0; l < k; ++l) q += sv.L[i * k + l] * sv.R[j * k + l];
        dq += (O[i * c + j] - q) * (O[i * c + j] - q);
      }
    dq = std::sqrt(dq / double(k));  // ‖Q‖_F = √k
    std::printf(
        "  NS %4lldx%-4lld  cond(U)=%9.1f  sv(O) in [%.4f, %.4f]  diag(LᵀOR) in [%.4f, %.4f]"
        " (x≥0.01: [%.4f, %.4f])  offdiag %.1e  ‖O−Q‖/‖Q‖ %.3f\n",
        (long long)r, (long long)c, sv.s[0] / sv.s.back(), slo, shi, dlo, dhi, dlo_cond, dhi_cond,
        off, dq);
    // The singular vectors are U's: leakage off the diagonal is float rounding only.
    EXPECT_LT(off, 2e-3) << r << "x" << c;
    // O's singular values are the diagonal (same vectors), and never exceed the quintic's maximum.
    EXPECT_NEAR(shi, dhi, 5e-3);
    EXPECT_LT(shi, 1.1450 + 3e-3) << r << "x" << c;
    band_lo = std::min(band_lo, slo);
    band_hi = std::max(band_hi, shi);
    band_lo_cond = std::min(band_lo_cond, dlo_cond);
    band_hi_cond = std::max(band_hi_cond, dhi_cond);
  }
  std::printf(
      "  NS singular-value band over all shapes: [%.4f, %.4f]; for σ/‖U‖ ≥ 0.01: [%.4f, %.4f]\n",
      band_lo, band_hi, band_lo_cond, band_hi_cond);
}

// A matrix with a known spectrum (σ spread log-uniformly over [1e-3, 1]·scale): the mapped values
// are p(σ) for the composed quintic, so the band is testable independently of random conditioning.
TEST(NewtonSchulz, KnownSpectrumMapsIntoBand) {
  const i64 r = 64, c = 96, k = 64;
  auto ql = svd(randn(r * r, 5), r, r).L;  // random orthogonal r x r
  auto qr = svd(randn(c * c, 6), c, c).L;  // random orthogonal c x c
  std::vector<double> s(k), U(r * c, 0.0);
  for (i64 i = 0; i < k; ++i) s[i] = std::pow(10.0, -3.0 * double(i) / double(k - 1));
  for (i64 i = 0; i < r; ++i)
    for (i64 j = 0; j < c; ++j)
      for (i64 l = 0; l < k; ++l) U[i * c + j] += ql[i * r + l] * s[l] * qr[j * c + l];
  auto O = cast<double>(run_ns<float>(cast<float>(U), r, c));
  // predicted p(σ/(‖U‖+1e-8)) by running the scalar iteration
  const double fro = norm(U) + 1e-8;
  auto so = svd(O, r, c).s;
  std::vector<double> pred(k);
  for (i64 i = 0; i < k; ++i) {
    double x = s[i] / fro;
    for (const auto& [a, b, cc] : kNsCoeffs) x = a * x + b * x * x * x + cc * x * x * x * x * x;
    pred[i] = x;
  }
  std::sort(pred.rbegin(), pred.rend());
  double worst = 0;
  for (i64 i = 0; i < k; ++i) worst = std::max(worst, std::abs(so[i] - pred[i]));
  EXPECT_LT(worst, 2e-3);
}

// ---- hyperball ----

TEST(MuonH, HyperballInvariantLayerAndExpertRadius) {
  const i64 E = 4, r = 16, c = 24, n = E * r * c;
  for (RadiusScope scope : {RadiusScope::kLayer, RadiusScope::kExpert}) {
    auto P = cast<float>(randn(n, 1));
    for (i64 e = 0; e < E; ++e)  // experts of different radii so the scopes differ
      for (i64 i = 0; i < r * c; ++i) P[e * r * c + i] *= float(1 + e);
    const auto P0 = P;
    std::vector<float> M(n, 0.0f), ws(muonh_workspace_size(E, r, c));
    for (int step = 0; step < 200; ++step) {
      auto G = cast<float>(randn(n, 100 + step));
      muonh_update<float>(P.data(), G.data(), M.data(), E, r, c, 0.02, scope, ws.data());
    }
    auto stack_norm = [&](const std::vector<float>& v) { return norm(v); };
    auto expert_norm = [&](const std::vector<float>& v, i64 e) {
      std::vector<float> s(v.begin() + e * r * c, v.begin() + (e + 1) * r * c);
      return norm(s);
    };
    EXPECT_NEAR(stack_norm(P) / stack_norm(P0), 1.0, 1e-6) << radius_scope_name(scope);
    double max_expert_drift = 0;
    for (i64 e = 0; e < E; ++e)
      max_expert_drift =
          std::max(max_expert_drift, std::abs(expert_norm(P, e) / expert_norm(P0, e) - 1.0));
    if (scope == RadiusScope::kExpert)
      EXPECT_LT(max_expert_drift, 1e-6);
    else  // one radius for the stack lets mass move between experts
      EXPECT_GT(max_expert_drift, 1e-3);
    // and the parameters did move
    std::vector<double> d(n);
    for (i64 i = 0; i < n; ++i) d[i] = double(P[i]) - double(P0[i]);
    EXPECT_GT(norm(d.data(), n) / stack_norm(P0), 0.3);
  }
}

TEST(MuonH, OneStepMatchesLiteralRecipe) {
  const i64 r = 12, c = 20, n = r * c;
  const double lr = 0.05, beta = 0.95;
  auto P = randn(n, 2), G = randn(n, 3), M = randn(n, 4, 0.1);
  // reference
  std::vector<double> Mr(n), U(n);
  for (i64 i = 0; i < n; ++i) Mr[i] = beta * M[i] + G[i], U[i] = beta * Mr[i] + G[i];
  auto O = ns_reference(U, r, c);
  double R = norm(P), on = norm(O);
  std::vector<double> Pr(n);
  for (i64 i = 0; i < n; ++i) Pr[i] = P[i] - lr * R * O[i] / on;
  double pn = norm(Pr);
  for (auto& x : Pr) x *= R / pn;
  // implementation
  std::vector<double> ws(muonh_workspace_size(1, r, c));
  muonh_update<double>(P.data(), G.data(), M.data(), 1, r, c, lr, RadiusScope::kLayer, ws.data());
  EXPECT_LT(max_rel_diff(M, Mr), 1e-14);
  EXPECT_LT(max_rel_diff(P, Pr), 1e-12);
}

TEST(AdamH, HyperballInvariant) {
  const i64 n = 50 * 70;
  auto P = cast<float>(randn(n, 9, 0.02));
  const auto P0 = P;
  std::vector<float> M(n, 0.0f), V(n, 0.0f), ws(adamh_workspace_size(n));
  AdamParams hp{0.9, 0.95, 1e-15};
  for (int step = 1; step <= 200; ++step) {
    auto G = cast<float>(randn(n, 500 + step, 1e-3));
    adamh_update<float>(P.data(), G.data(), M.data(), V.data(), n, 0.01, hp, step, ws.data());
  }
  EXPECT_NEAR(norm(P) / norm(P0), 1.0, 1e-6);
  std::vector<double> d(n);
  for (i64 i = 0; i < n; ++i) d[i] = double(P[i]) - double(P0[i]);
  EXPECT_GT(norm(d.data(), n) / norm(P0), 0.1);
}

TEST(Hyperball, FloorsZeroNorms) {
  std::vector<float> P(10, 0.0f), O(10, 0.0f);
  hyperball_step<float>(P.data(), O.data(), 1, 10, 0.1);
  for (float x : P) EXPECT_TRUE(std::isfinite(x));
  // a zero gradient (and zero momentum) leaves P exactly where it was
  const i64 r = 6, c = 9;
  auto Pm = cast<float>(randn(r * c, 77));
  const auto P0 = Pm;
  std::vector<float> G(r * c, 0.0f), M(r * c, 0.0f), ws(muonh_workspace_size(1, r, c));
  muonh_update<float>(Pm.data(), G.data(), M.data(), 1, r, c, 0.1, RadiusScope::kLayer, ws.data());
  EXPECT_EQ(Pm, P0);
  EXPECT_EQ(parse_radius_scope("expert"), RadiusScope::kExpert);
  EXPECT_EQ(parse_radius_scope("layer"), RadiusScope::kLayer);
  EXPECT_THROW(parse_radius_scope("matrix"), marin::Error);
}

// ---- Adam ----
// β1 = 0.9, β2 = 0.999, ε = 1e-8, lr = 0.1, P = (1, −2), g1 = (0.5, 0), g2 = (−0.25, 3).
// Step 1, element 0: m = 0.05, v = 0.00025, m̂ = 0.5, v̂ = 0.25, u = 0.5/(0.5 + 1e-8),
//   P = 1 − 0.1·u = 0.900000002. Element 1: g = 0 → u = 0, P = −2.
// Step 2, element 0: m = 0.045 − 0.025 = 0.02, v = 0.00024975 + 0.0000625 = 0.00031225,
//   m̂ = 0.02/0.19 = 0.105263158, v̂ = 0.00031225/0.001999 = 0.156203102, √v̂ = 0.395225381,
//   u = 0.266337013, P = 0.900000002 − 0.0266337013 = 0.873366299.
// Element 1: m = 0.3, v = 0.009, m̂ = 1.578947368, v̂ = 4.502251126, √v̂ = 2.121850872,
//   u = 0.744136821, P = −2.074413682.
// With wd = 0.1 inside u: step 1 P = (0.890000002, −1.98); step 2 P = (0.854466299, −2.034613682).
TEST(Adam, HandComputedTwoSteps) {
  const AdamParams hp{0.9, 0.999, 1e-8};
  const double g[2][2] = {{0.5, 0.0}, {-0.25, 3.0}};
  const double want[2][2][2] = {{{0.900000002, -2.0}, {0.8733662987078463, -2.0744136820059964}},
                                {{0.890000002, -1.98}, {0.8544662986878464, -2.0346136820059963}}};
  for (int w = 0; w < 2; ++w) {
    const double wd = w ? 0.1 : 0.0;
    std::vector<double> P = {1.0, -2.0}, M(2, 0.0), V(2, 0.0);
    std::vector<float> Pf = {1.0f, -2.0f}, Mf(2, 0.0f), Vf(2, 0.0f);
    for (int t = 1; t <= 2; ++t) {
      std::vector<double> G = {g[t - 1][0], g[t - 1][1]};
      std::vector<float> Gf = cast<float>(G);
      adam_update<double>(P.data(), G.data(), M.data(), V.data(), 2, 0.1, hp, t, wd);
      adam_update<float>(Pf.data(), Gf.data(), Mf.data(), Vf.data(), 2, 0.1, hp, t, wd);
      for (int i = 0; i < 2; ++i) {
        EXPECT_NEAR(P[i], want[w][t - 1][i], 1e-12) << "wd " << wd << " t " << t << " i " << i;
        EXPECT_NEAR(Pf[i], want[w][t - 1][i], 2e-6) << "float wd " << wd << " t " << t;
      }
    }
    EXPECT_NEAR(M[0], 0.02, 1e-15);
    EXPECT_NEAR(V[1], 0.009, 1e-15);
  }
  std::vector<double> P = {1.0}, G = {1.0}, M = {0.0}, V = {0.0};
  EXPECT_THROW(adam_update<double>(P.data(), G.data(), M.data(), V.data(), 1, 0.1, hp, 0),
               marin::Error);
}

TEST(Adam, AdamWIsDecoupledDecay) {
  const AdamParams hp{0.9, 0.95, 1e-8};
  auto P = randn(100, 21), G = randn(100, 22);
  auto Pw = P, Pa = P;
  std::vector<double> Mw(100, 0), Vw(100, 0), Ma(100, 0), Va(100, 0), U(100);
  adamw_update<double>(Pw.data(), G.data(), Mw.data(), Vw.data(), 100, 0.01, hp, 1, 0.1);
  adam_direction<double>(G.data(), Ma.data(), Va.data(), U.data(), 100, hp, 1);
  // torch.optim.AdamW: P ← P·(1 − lr·wd), then P ← P − lr·m̂/(√v̂ + ε)
  for (int i = 0; i < 100; ++i) Pa[i] = Pa[i] * (1 - 0.01 * 0.1) - 0.01 * U[i];
  EXPECT_LT(max_rel_diff(Pw, Pa), 1e-14);
  EXPECT_EQ(Mw, Ma);
  EXPECT_EQ(Vw, Va);
}

// ---- schedule ----

TEST(Schedule, WarmupAndDecay) {
  const double peak = 3e-3;
  const i64 N = 1000, w = 10;
  ASSERT_EQ(warmup_steps(N), w);
  EXPECT_EQ(lr_at(peak, 0, N), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(peak, 1, N), peak / 10);
  EXPECT_DOUBLE_EQ(lr_at(peak, w - 1, N), peak * 0.9);
  EXPECT_DOUBLE_EQ(lr_at(peak, w, N), peak);
  EXPECT_DOUBLE_EQ(lr_at(peak, 505, N), peak * (1 - 0.95 * 495.0 / 990.0));
  // last step: just above 5% of peak, by exactly 0.95/(N − w) of peak
  const double last = lr_at(peak, N - 1, N);
  EXPECT_GT(last, 0.05 * peak);
  EXPECT_NEAR(last, peak * (0.05 + 0.95 / 990.0), 1e-15 * peak);
  EXPECT_NEAR(lr_at(peak, N, N), 0.05 * peak, 1e-18);  // would reach 5% at s = N
  // monotone after warmup
  for (i64 s = w; s + 1 < N; ++s) ASSERT_LT(lr_at(peak, s + 1, N), lr_at(peak, s, N));
  for (i64 s = 0; s + 1 < w; ++s) ASSERT_LT(lr_at(peak, s, N), lr_at(peak, s + 1, N));
}

TEST(Schedule, NoWarmupForShortRuns) {
  EXPECT_EQ(warmup_steps(99), 0);
  EXPECT_EQ(warmup_steps(100), 1);
  EXPECT_EQ(warmup_steps(390251), 3902);     // the 535B run
  EXPECT_DOUBLE_EQ(lr_at(1.0, 0, 50), 1.0);  // w = 0: starts at peak
  EXPECT_DOUBLE_EQ(lr_at(1.0, 49, 50), 1.0 - 0.95 * 49.0 / 50.0);
  EXPECT_DOUBLE_EQ(lr_at(1.0, 0, 1), 1.0);
  EXPECT_EQ(lr_at(1.0, 0, 100), 0.0);  // w = 1: step 0 is the zero of the warmup
  EXPECT_THROW(lr_at(1.0, 0, 0), marin::Error);
}

TEST(Schedule, WeightDecay) {
  EXPECT_DOUBLE_EQ(weight_decay_at(0, 1000), 0.02);
  EXPECT_DOUBLE_EQ(weight_decay_at(250, 1000), 0.015);
  EXPECT_DOUBLE_EQ(weight_decay_at(1000, 1000), 0.0);
  EXPECT_DOUBLE_EQ(weight_decay_at(5000, 1000), 0.0);
  EXPECT_DOUBLE_EQ(weight_decay_at(500, 1000, 0.1), 0.05);
}

}  // namespace

namespace {
TEST(NewtonSchulz, CoefficientsAreTheRecipes) {
  const double want[5][3] = {{4.0848, -6.8946, 2.9270},
                             {3.9505, -6.3029, 2.6377},
                             {3.7418, -5.5913, 2.3037},
                             {2.8769, -3.1427, 1.2046},
                             {2.8366, -3.0525, 1.2012}};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(marin::optim::kNsCoeffs[i].a, want[i][0]);
    EXPECT_EQ(marin::optim::kNsCoeffs[i].b, want[i][1]);
    EXPECT_EQ(marin::optim::kNsCoeffs[i].c, want[i][2]);
  }
}
}  // namespace
