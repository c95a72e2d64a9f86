// Small kernels: forward against direct formulas, backward against central finite differences in
// double, float against double.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "gradcheck.hpp"
#include "isa_loop.hpp"
#include "kernels/gates.hpp"
#include "kernels/kernels.hpp"
#include "kernels/optim.hpp"

namespace mk = marin::kernels;
using Vec = std::vector<double>;
using namespace marin::testing;

namespace {

constexpr double kFdTol = 1e-6;
constexpr double kF32Tol = 1e-5;

}  // namespace

// ---------------------------------------------------------------------------------------------
TEST(RmsNorm, ForwardMatchesFormula) {
  const int rows = 5, dim = 37;
  Vec x = randn(rows * dim, 1), g = randn(dim, 2), y(rows * dim), rstd(rows);
  mk::rmsnorm_fwd(x.data(), g.data(), y.data(), rstd.data(), rows, dim, 1e-5);
  Vec ref(rows * dim);
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += x[r * dim + i] * x[r * dim + i];
    const double rs = 1 / std::sqrt(ss / dim + 1e-5);
    EXPECT_NEAR(rstd[r], rs, 1e-12 * rs);
    for (int i = 0; i < dim; ++i) ref[r * dim + i] = x[r * dim + i] * rs * g[i];
  }
  EXPECT_LT(rel_err(y, ref), 1e-14);
}

TEST(RmsNorm, BackwardFiniteDifferences) {
  for (bool gain : {true, false}) {
    const int rows = 6, dim = 70;  // dim > 64: exercises two column chunks of dg
    Vec x = randn(rows * dim, 3), g = randn(dim, 4), R = randn(rows * dim, 5);
    Vec y(rows * dim), rstd(rows);
    const double* gp = gain ? g.data() : nullptr;
    auto loss = [&] {
      mk::rmsnorm_fwd(x.data(), gp, y.data(), rstd.data(), rows, dim, 1e-6);
      return dot(y, R);
    };
    loss();
    Vec dx(rows * dim, 7.0), dg(dim, 0.5);  // dx must be overwritten, dg accumulated
    mk::rmsnorm_bwd(R.data(), x.data(), gp, rstd.data(), dx.data(), gain ? dg.data() : nullptr,
                    rows, dim);
    EXPECT_LT(rel_err(dx, fd_grad(x, loss)), kFdTol) << "gain=" << gain;
    if (gain) {
      Vec fd = fd_grad(g, loss);
      for (auto& v : fd) v += 0.5;
      EXPECT_LT(rel_err(dg, fd), kFdTol);
    }
  }
}

TEST(RmsNorm, FloatMatchesDouble) {
  // Every SIMD target this CPU supports, each against the double (generic) path.
  for_each_isa([&] {
    const int rows = 300, dim = 200;  // large enough to run in parallel
    Vec x = randn(rows * dim, 6), g = randn(dim, 7), dy = randn(rows * dim, 8);
    Vec y(rows * dim), rstd(rows), dx(rows * dim), dg(dim);
    mk::rmsnorm_fwd(x.data(), g.data(), y.data(), rstd.data(), rows, dim, 1e-5);
    mk::rmsnorm_bwd(dy.data(), x.data(), g.data(), rstd.data(), dx.data(), dg.data(), rows, dim);
    auto xf = to_f(x), gf = to_f(g), dyf = to_f(dy);
    std::vector<float> yf(rows * dim), rf(rows), dxf(rows * dim), dgf(dim);
    mk::rmsnorm_fwd(xf.data(), gf.data(), yf.data(), rf.data(), rows, dim, 1e-5);
    mk::rmsnorm_bwd(dyf.data(), xf.data(), gf.data(), rf.data(), dxf.data(), dgf.data(), rows, dim);
    EXPECT_LT(rel_err(to_d(yf), y), kF32Tol);
    EXPECT_LT(rel_err(to_d(dxf), dx), kF32Tol);
    EXPECT_LT(rel_err(to_d(dgf), dg), kF32Tol);
  });
}

// ---------------------------------------------------------------------------------------------
TEST(SwiGLU, ForwardAndBackward) {
  const int n = 101;
  Vec a = randn(n, 10, 3.0), b = randn(n, 11), R = randn(n, 12), h(n);
  mk::swiglu_fwd(a.data(), b.data(), h.data(), n);
  for (int i = 0; i < n; ++i)
    EXPECT_NEAR(h[i], a[i] / (1 + std::exp(-a[i])) * b[i], 1e-14 * (1 + std::abs(h[i])));
  auto loss = [&] {
    mk::swiglu_fwd(a.data(), b.data(), h.data(), n);
    return dot(h, R);
  };
  Vec da(n), db(n);
  mk::swiglu_bwd(R.data(), a.data(), b.data(), da.data(), db.data(), n);
  EXPECT_LT(rel_err(da, fd_grad(a, loss)), kFdTol);
  EXPECT_LT(rel_err(db, fd_grad(b, loss)), kFdTol);
}

TEST(SwiGLU, FloatMatchesDouble) {
  // Every SIMD target this CPU supports, each against the double (generic) path.
  for_each_isa([&] {
    const int n = 70000 + 7;  // parallel blocks plus a masked tail
    Vec a = randn(n, 13, 4.0), b = randn(n, 14), dh = randn(n, 15);
    a[0] = -120, a[1] = 120, a[2] = -90;  // saturating inputs must stay finite
    Vec h(n), da(n), db(n);
    mk::swiglu_fwd(a.data(), b.data(), h.data(), n);
    mk::swiglu_bwd(dh.data(), a.data(), b.data(), da.data(), db.data(), n);
    auto af = to_f(a), bf = to_f(b), dhf = to_f(dh);
    std::vector<float> hf(n), daf(n), dbf(n);
    mk::swiglu_fwd(af.data(), bf.data(), hf.data(), n);
    mk::swiglu_bwd(dhf.data(), af.data(), bf.data(), daf.data(), dbf.data(), n);
    for (int i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(hf[i]) && std::isfinite(daf[i])) << i;
    EXPECT_LT(rel_err(to_d(hf), h), kF32Tol);
    EXPECT_LT(rel_err(to_d(daf), da), kF32Tol);
    EXPECT_LT(rel_err(to_d(dbf), db), kF32Tol);
  });
}

// ---------------------------------------------------------------------------------------------
// GatedNorm's gates: silu on the low-rank projection, σ(logit)·r on the normed input.
TEST(Gates, ForwardAndBackward) {
  const int n = 103;
  Vec u = randn(n, 40, 3.0), r = randn(n, 41), logit = randn(n, 42, 2.0), R = randn(n, 43);
  Vec su(n), g = logit, out(n);
  mk::silu_fwd(u.data(), su.data(), n);
  mk::sigmoid_gate_fwd(r.data(), g.data(), out.data(), n);
  for (int i = 0; i < n; ++i) {
    const double s = 1 / (1 + std::exp(-u[i])), sg = 1 / (1 + std::exp(-logit[i]));
    EXPECT_NEAR(su[i], u[i] * s, 1e-14 * (1 + std::abs(su[i])));
    EXPECT_NEAR(g[i], sg, 1e-15);
    EXPECT_NEAR(out[i], r[i] * sg, 1e-14 * (1 + std::abs(out[i])));
  }
  auto silu_loss = [&] {
    mk::silu_fwd(u.data(), su.data(), n);
    return dot(su, R);
  };
  Vec du = R;  // in place: du aliases dsu
  mk::silu_bwd(du.data(), u.data(), du.data(), n);
  EXPECT_LT(rel_err(du, fd_grad(u, silu_loss)), kFdTol);
  auto gate_loss = [&] {
    Vec gl = logit;
    mk::sigmoid_gate_fwd(r.data(), gl.data(), out.data(), n);
    return dot(out, R);
  };
  Vec dr(n), dlogit(n);
  mk::sigmoid_gate_bwd(R.data(), r.data(), g.data(), dr.data(), dlogit.data(), n);
  EXPECT_LT(rel_err(dr, fd_grad(r, gate_loss)), kFdTol);
  EXPECT_LT(rel_err(dlogit, fd_grad(logit, gate_loss)), kFdTol);
}

TEST(Gates, FloatMatchesDouble) {
  // Every SIMD target this CPU supports, each against the double (generic) path.
  for_each_isa([&] {
    const int n = 70000 + 7;  // parallel blocks plus a tail
    Vec u = randn(n, 44, 4.0), r = randn(n, 45), logit = randn(n, 46, 4.0), dy = randn(n, 47);
    u[0] = -120, u[1] = 120, logit[2] = -120, logit[3] = 120;  // saturating: finite results
    Vec su(n), du = dy, g = logit, out(n), dr(n), dl(n);
    mk::silu_fwd(u.data(), su.data(), n);
    mk::silu_bwd(du.data(), u.data(), du.data(), n);
    mk::sigmoid_gate_fwd(r.data(), g.data(), out.data(), n);
    mk::sigmoid_gate_bwd(dy.data(), r.data(), g.data(), dr.data(), dl.data(), n);
    auto uf = to_f(u), rf = to_f(r), gf = to_f(logit), duf = to_f(dy), dyf = to_f(dy);
    std::vector<float> suf(n), outf(n), drf(n), dlf(n);
    mk::silu_fwd(uf.data(), suf.data(), n);
    mk::silu_bwd(duf.data(), uf.data(), duf.data(), n);
    mk::sigmoid_gate_fwd(rf.data(), gf.data(), outf.data(), n);
    mk::sigmoid_gate_bwd(dyf.data(), rf.data(), gf.data(), drf.data(), dlf.data(), n);
    for (int i = 0; i < n; ++i)
      ASSERT_TRUE(std::isfinite(suf[i]) && std::isfinite(duf[i]) && std::isfinite(outf[i]) &&
                  std::isfinite(dlf[i]))
          << i;
    EXPECT_LT(rel_err(to_d(suf), su), kF32Tol);
    EXPECT_LT(rel_err(to_d(duf), du), kF32Tol);
    EXPECT_LT(rel_err(to_d(gf), g), kF32Tol);
    EXPECT_LT(rel_err(to_d(outf), out), kF32Tol);
    EXPECT_LT(rel_err(to_d(drf), dr), kF32Tol);
    EXPECT_LT(rel_err(to_d(dlf), dl), kF32Tol);
  });
}

// ---------------------------------------------------------------------------------------------
namespace {
// Two rows; row 0 holds three documents, row 1 one document.
std::vector<int32_t> sconv_seg(int S) {
  std::vector<int32_t> seg(2 * S);
  for (int t = 0; t < S; ++t) {
    seg[t] = t < 3 ? 7 : (t < 9 ? 8 : 9);
    seg[S + t] = 4;
  }
  return seg;
}
}  // namespace

TEST(SConv, ForwardMatchesDefinition) {
  const int B = 2, S = 14, C = 5, k = 4;
  auto seg = sconv_seg(S);
  Vec x = randn(B * S * C, 20), w = randn(k * C, 21), y(B * S * C);
  mk::sconv_fwd(x.data(), w.data(), seg.data(), y.data(), B, S, C, k);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < S; ++t)
      for (int c = 0; c < C; ++c) {
        double ref = 0;
        for (int j = 0; j < k; ++j) {
          if (t - j < 0) continue;
          if (j >= 1 && seg[b * S + t - j] != seg[b * S + t]) continue;
          ref += w[j * C + c] * x[(b * S + t - j) * C + c];
        }
        EXPECT_NEAR(y[(b * S + t) * C + c], ref, 1e-14) << b << " " << t << " " << c;
      }
  // Token 3 starts a document: only tap 0 contributes.
  EXPECT_DOUBLE_EQ(y[3 * C + 1], w[1] * x[3 * C + 1]);
}

TEST(SConv, BackwardFiniteDifferences) {
  const int B = 2, S = 14, C = 70, k = 4;  // C > 64: two channel chunks of dw
  auto seg = sconv_seg(S);
  Vec x = randn(B * S * C, 22), w = randn(k * C, 23), R = randn(B * S * C, 24), y(B * S * C);
  auto loss = [&] {
    mk::sconv_fwd(x.data(), w.data(), seg.data(), y.data(), B, S, C, k);
    return dot(y, R);
  };
  Vec dx(B * S * C, 3.0), dw(k * C, -1.0);
  mk::sconv_bwd(R.data(), x.data(), w.data(), seg.data(), dx.data(), dw.data(), B, S, C, k);
  EXPECT_LT(rel_err(dx, fd_grad(x, loss)), kFdTol);
  Vec fd = fd_grad(w, loss);
  for (auto& v : fd) v -= 1.0;
  EXPECT_LT(rel_err(dw, fd), kFdTol);
}

TEST(SConv, FloatMatchesDouble) {
  // Every SIMD target this CPU supports, each against the double (generic) path.
  for_each_isa([&] {
    const int B = 2, S = 300, C = 96, k = 4;
    std::vector<int32_t> seg(B * S);
    for (int i = 0; i < B * S; ++i) seg[i] = i / 77;
    Vec x = randn(B * S * C, 25), w = randn(k * C, 26), dy = randn(B * S * C, 27);
    Vec y(B * S * C), dx(B * S * C), dw(k * C);
    mk::sconv_fwd(x.data(), w.data(), seg.data(), y.data(), B, S, C, k);
    mk::sconv_bwd(dy.data(), x.data(), w.data(), seg.data(), dx.data(), dw.data(), B, S, C, k);
    auto xf = to_f(x), wf = to_f(w), dyf = to_f(dy);
    std::vector<float> yf(B * S * C), dxf(B * S * C), dwf(k * C);
    mk::sconv_fwd(xf.data(), wf.data(), seg.data(), yf.data(), B, S, C, k);
    mk::sconv_bwd(dyf.data(), xf.data(), wf.data(), seg.data(), dxf.data(), dwf.data(), B, S, C, k);
    EXPECT_LT(rel_err(to_d(yf), y), kF32Tol);
    EXPECT_LT(rel_err(to_d(dxf), dx), kF32Tol);
    EXPECT_LT(rel_err(to_d(dwf), dw), kF32Tol);
  });
}

// ---------------------------------------------------------------------------------------------
TEST(Rope, ForwardMatchesFormulaAndPassesTail) {
  const int B = 2, S = 9, H = 3, hd = 12, rope_dim = 8;
  const long row_stride = H * hd + 5;  // padded rows: the gap must be left alone
  const double theta = 10000;
  Vec x = randn(B * S * row_stride, 30), y = x;
  mk::rope(y.data(), B, S, H, hd, row_stride, rope_dim, theta, false);
  for (int b = 0; b < B; ++b)
    for (int p = 0; p < S; ++p) {
      const long base = (long(b) * S + p) * row_stride;
      for (int h = 0; h < H; ++h) {
        const double* xi = x.data() + base + h * hd;
        const double* yi = y.data() + base + h * hd;
        for (int i = 0; i < rope_dim / 2; ++i) {
          const double phi = p * std::pow(theta, -2.0 * i / rope_dim);
          EXPECT_NEAR(yi[2 * i], xi[2 * i] * std::cos(phi) - xi[2 * i + 1] * std::sin(phi), 1e-13);
          EXPECT_NEAR(yi[2 * i + 1], xi[2 * i + 1] * std::cos(phi) + xi[2 * i] * std::sin(phi),
                      1e-13);
        }
        for (int d = rope_dim; d < hd; ++d) EXPECT_EQ(yi[d], xi[d]);
      }
      for (long g = H * hd; g < row_stride; ++g) EXPECT_EQ(y[base + g], x[base + g]);
    }
  // Position 0 is the identity; the inverse undoes the rotation.
  for (int d = 0; d < H * hd; ++d) EXPECT_EQ(y[d], x[d]);
  mk::rope(y.data(), B, S, H, hd, row_stride, rope_dim, theta, true);
  EXPECT_LT(rel_err(y, x), 1e-14);
  EXPECT_GT(rel_err(Vec(x.begin(), x.end()),
                    [&] {
                      Vec z = x;
                      mk::rope(z.data(), B, S, H, hd, row_stride, rope_dim, theta, false);
                      return z;
                    }()),
            1e-3);
}

TEST(Rope, InverseIsTheBackward) {
  const int B = 1, S = 7, H = 2, hd = 8, rope_dim = 4;
  Vec x = randn(B * S * H * hd, 31), R = randn(B * S * H * hd, 32);
  auto loss = [&] {
    Vec y = x;
    mk::rope(y.data(), B, S, H, hd, H * hd, rope_dim, 500.0, false);
    return dot(y, R);
  };
  Vec dx = R;
  mk::rope(dx.data(), B, S, H, hd, H * hd, rope_dim, 500.0, true);
  EXPECT_LT(rel_err(dx, fd_grad(x, loss)), kFdTol);
}

TEST(Rope, FloatMatchesDouble) {
  // Every SIMD target this CPU supports, each against the double (generic) path.
  for_each_isa([&] {
    const int B = 2, S = 512, H = 4, hd = 32, rope_dim = 16;
    Vec x = randn(B * S * H * hd, 33);
    auto xf = to_f(x);
    mk::rope(x.data(), B, S, H, hd, H * hd, rope_dim, 10000.0, false);
    mk::rope(xf.data(), B, S, H, hd, H * hd, rope_dim, 10000.0, false);
    EXPECT_LT(rel_err(to_d(xf), x), kF32Tol);
  });
}

// ---------------------------------------------------------------------------------------------
namespace {
void xent_ref(const Vec& logits, const std::vector<int32_t>& labels, int rows, int V, Vec& lse,
              Vec& ce) {
  for (int r = 0; r < rows; ++r) {
    double m = -1e300, s = 0;
    for (int i = 0; i < V; ++i) m = std::max(m, logits[r * V + i]);
    for (int i = 0; i < V; ++i) s += std::exp(logits[r * V + i] - m);
    lse[r] = m + std::log(s);
    ce[r] = lse[r] - logits[r * V + labels[r]];
  }
}
}  // namespace

TEST(Xent, ForwardMatchesReference) {
  const int rows = 4, V = 53;
  Vec x = randn(rows * V, 40, 3.0), lse(rows), ce(rows), lr(rows), cr(rows);
  x[5] = 80;  // large logit: needs the max shift
  std::vector<int32_t> labels = {0, 52, 17, 5};
  mk::xent_fwd(x.data(), labels.data(), lse.data(), ce.data(), rows, V);
  xent_ref(x, labels, rows, V, lr, cr);
  EXPECT_LT(rel_err(lse, lr), 1e-14);
  EXPECT_LT(rel_err(ce, cr), 1e-13);
}

TEST(Xent, BackwardFiniteDifferencesAndInPlace) {
  const int rows = 5, V = 40;
  const double ce_scale = 0.7, z_scale = 0.3;
  Vec x = randn(rows * V, 41, 2.0), lse(rows), ce(rows);
  std::vector<int32_t> labels = {3, 0, 39, 12, 12};
  auto loss = [&] {
    mk::xent_fwd(x.data(), labels.data(), lse.data(), ce.data(), rows, V);
    double L = 0;
    for (int r = 0; r < rows; ++r) L += ce_scale * ce[r] + z_scale * lse[r] * lse[r];
    return L;
  };
  loss();
  Vec dl(rows * V);
  mk::xent_bwd(x.data(), labels.data(), lse.data(), dl.data(), rows, V, ce_scale, z_scale);
  EXPECT_LT(rel_err(dl, fd_grad(x, loss)), kFdTol);
  loss();  // fd_grad leaves lse at the last perturbed point
  Vec inplace = x;
  mk::xent_bwd(inplace.data(), labels.data(), lse.data(), inplace.data(), rows, V, ce_scale,
               z_scale);
  EXPECT_LT(rel_err(inplace, dl), 1e-15);
}

TEST(Xent, FloatMatchesDouble) {
  // Every SIMD target this CPU supports, each against the double (generic) path.
  for_each_isa([&] {
    const int rows = 64, V = 1000 + 3;
    Vec x = randn(rows * V, 42, 4.0), lse(rows), ce(rows), dl(rows * V);
    std::vector<int32_t> labels(rows);
    for (int r = 0; r < rows; ++r) labels[r] = (r * 131) % V;
    mk::xent_fwd(x.data(), labels.data(), lse.data(), ce.data(), rows, V);
    mk::xent_bwd(x.data(), labels.data(), lse.data(), dl.data(), rows, V, 1.0 / rows, 1e-4 / rows);
    auto xf = to_f(x);
    std::vector<float> lf(rows), cf(rows);
    mk::xent_fwd(xf.data(), labels.data(), lf.data(), cf.data(), rows, V);
    mk::xent_bwd(xf.data(), labels.data(), lf.data(), xf.data(), rows, V, 1.0f / rows,
                 1e-4f / rows);
    EXPECT_LT(rel_err(to_d(lf), lse), kF32Tol);
    EXPECT_LT(rel_err(to_d(cf), ce), kF32Tol);
    EXPECT_LT(rel_err(to_d(xf), dl), kF32Tol);
  });
}

TEST(Xent, IgnoredLabel) {
  const int rows = 2, V = 10;
  Vec x = randn(rows * V, 43), lse(rows), ce(rows), dl(rows * V);
  std::vector<int32_t> labels = {-1, 4};
  mk::xent_fwd(x.data(), labels.data(), lse.data(), ce.data(), rows, V);
  EXPECT_EQ(ce[0], 0.0);
  mk::xent_bwd(x.data(), labels.data(), lse.data(), dl.data(), rows, V, 1.0, 0.0);
  for (int i = 0; i < V; ++i) EXPECT_EQ(dl[i], 0.0);
}

// ---------------------------------------------------------------------------------------------
// GEMM: float against double on skinny, square and wide shapes, every transpose, alpha/beta,
// leading dimensions wider than the matrix (whose padding must stay untouched).
TEST(Gemm, FloatMatchesDouble) {
  struct Shape {
    int M, N, K;
  };
  for (const Shape sh :
       {Shape{37, 29, 32}, Shape{128, 128, 128}, Shape{300, 260, 96}, Shape{5, 700, 1100}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const int M = sh.M, N = sh.N, K = sh.K;
      const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
      Vec A = randn(size_t(ta ? K : M) * lda, 50), B = randn(size_t(tb ? N : K) * ldb, 51);
      Vec C = randn(size_t(M) * ldc, 52), Cd = C;
      mk::gemm<double>(ta, tb, M, N, K, 0.5, A.data(), lda, B.data(), ldb, 0.25, Cd.data(), ldc);
      for (const float beta : {0.0f, 0.25f}) {
        auto Af = to_f(A), Bf = to_f(B), Cf = to_f(C);
        mk::gemm<float>(ta, tb, M, N, K, 0.5f, Af.data(), lda, Bf.data(), ldb, beta, Cf.data(),
                        ldc);
        Vec want = Cd;
        if (beta == 0.0f)
          for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) want[size_t(i) * ldc + j] -= 0.25 * C[size_t(i) * ldc + j];
        // The padding columns of C are untouched.
        for (int i = 0; i < M; ++i)
          for (int j = N; j < ldc; ++j)
            ASSERT_EQ(Cf[size_t(i) * ldc + j], float(C[size_t(i) * ldc + j]));
        EXPECT_LT(rel_err(to_d(Cf), want), kF32Tol)
            << M << "x" << N << "x" << K << " ta " << ta << " tb " << tb << " beta " << beta;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The exact gradient sum's arithmetic (parallel::ExactSum) is bit for bit its scalar definition on
// every ISA: ties to even, magnitudes near 2^62, denormals, non-finite values in the vector body
// and in the tail, lengths that are not a multiple of any vector.
// The sum of squares of every hyperball radius: one fixed order on every ISA (16 partial sums,
// then those in order), so the SIMD targets give the scalar definition's bits exactly.
TEST(SumSquares, EveryIsaComputesTheScalarDefinitionExactly) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-30, 30);
  std::vector<float> x(4099);
  for (float& v : x) v = std::ldexp(mant(rng), expo(rng));
  x[5] = 1e-42f;  // a denormal
  auto definition = [&](const float* p, int64_t n) {
    double part[mk::kSumSquaresPartials] = {};
    for (int64_t i = 0; i < n; ++i)
      part[i % mk::kSumSquaresPartials] += double(p[i]) * double(p[i]);
    double total = 0;
    for (double q : part) total += q;
    return total;
  };
  int64_t differs_from_index_order = 0;
  for_each_isa([&] {
    for (int64_t n : {4099, 4096, 1, 15, 16, 17, 0}) {
      ASSERT_EQ(mk::sum_squares(x.data(), n), definition(x.data(), n)) << "n " << n;
      double in_order = 0;
      for (int64_t i = 0; i < n; ++i) in_order += double(x[size_t(i)]) * double(x[size_t(i)]);
      EXPECT_NEAR(mk::sum_squares(x.data(), n), in_order, 1e-12 * in_order);  // n·ε
      differs_from_index_order += mk::sum_squares(x.data(), n) != in_order;
    }
    // Offsets into the array (a stack's matrices): the order follows the index, not the address.
    ASSERT_EQ(mk::sum_squares(x.data() + 3, 1000), definition(x.data() + 3, 1000));
  });
  EXPECT_GT(differs_from_index_order, 0);  // the data tells the two orders apart
  std::vector<double> xd(x.begin(), x.end());
  EXPECT_EQ(mk::sum_squares(xd.data(), 4099),
            definition(x.data(), 4099));  // squares of floats: exact
}

TEST(FixedPoint, EveryIsaComputesTheScalarDefinitionExactly) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-40, 0);
  const int n = 1031, np = 4;
  std::vector<std::vector<float>> xs(np, std::vector<float>(n));
  for (auto& x : xs)
    for (float& v : x) v = std::ldexp(mant(rng), expo(rng));
  xs[0][3] = 1.0f;    // the largest magnitude
  xs[1][5] = 1e-42f;  // a denormal
  xs[2][7] = -0.0f;
  const int shift = 59;  // |x|·2^59 < 2^60: four terms cannot overflow
  const double scale = std::ldexp(1.0, shift);
  // Ties: k + 0.5 after scaling, both signs, odd and even k.
  for (int k = 0; k < 8; ++k) {
    for (int p = 0; p < 3; ++p) xs[size_t(p)][size_t(100 + k)] = 0;
    xs[3][size_t(100 + k)] = float(std::ldexp((k - 4) + 0.5, -shift));
  }
  std::vector<const float*> ptr;
  for (auto& x : xs) ptr.push_back(x.data());

  std::vector<int64_t> want(n);
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < np; ++p)
      want[size_t(i)] += std::llrint(double(xs[size_t(p)][size_t(i)]) * scale);
  std::vector<float> want_f(n);
  for (int i = 0; i < n; ++i)
    want_f[size_t(i)] = float(double(want[size_t(i)]) * std::ldexp(1.0, -shift));
  EXPECT_EQ(want[100], -4);  // -3.5 → -4 (even)
  EXPECT_EQ(want[101], -2);  // -2.5 → -2

  for_each_isa([&] {
    for (int len : {n, 1, 3, 17}) {
      std::vector<int64_t> acc(size_t(n), 99);
      mk::fixed_point_sum(ptr.data(), np, len, scale, acc.data());
      for (int i = 0; i < len; ++i) ASSERT_EQ(acc[size_t(i)], want[size_t(i)]) << "i " << i;
      EXPECT_EQ(acc[size_t(len) % size_t(n)], len == n ? want[0] : 99);  // nothing past len
      std::vector<float> out(static_cast<size_t>(len));
      mk::fixed_point_to_float(acc.data(), len, std::ldexp(1.0, -shift), out.data());
      for (int i = 0; i < len; ++i) ASSERT_EQ(out[size_t(i)], want_f[size_t(i)]) << "i " << i;
    }
    // Terms near 2^61 of both signs (AVX2 splits each term at 2^32; these fill both halves).
    {
      const float big_terms[2][9] = {
          {1.0f, -1.0f, 0.99999994f, -0.99999994f, 0.7500001f, -0.5f, 1.0f, -1.0f, 3e-10f},
          {1.0f, -1.0f, -0.99999994f, 0.6f, -0.7500001f, -0.49999997f, -1e-9f, 1e-9f, -2e-10f}};
      const double big_scale = std::ldexp(1.0, 61);
      const float* bp[2] = {big_terms[0], big_terms[1]};
      std::vector<int64_t> got(9);
      mk::fixed_point_sum(bp, 2, 9, big_scale, got.data());
      for (int i = 0; i < 9; ++i)
        ASSERT_EQ(got[size_t(i)], std::llrint(double(big_terms[0][i]) * big_scale) +
                                      std::llrint(double(big_terms[1][i]) * big_scale))
            << "i " << i;
    }
    std::vector<int64_t> zero(n, 7);
    mk::fixed_point_sum(ptr.data(), 0, n, scale, zero.data());
    EXPECT_EQ(zero, std::vector<int64_t>(n, 0));
    // Integers beyond double's 53 bits round to nearest on the way back.
    const std::vector<int64_t> big = {(int64_t(1) << 62) - 1, -(int64_t(1) << 61) - 3,
                                      (int64_t(1) << 55) + 7, 12345, -1};
    std::vector<float> got(big.size());
    mk::fixed_point_to_float(big.data(), int64_t(big.size()), std::ldexp(1.0, -62), got.data());
    for (size_t i = 0; i < big.size(); ++i)
      EXPECT_EQ(got[i], float(double(big[i]) * std::ldexp(1.0, -62))) << i;

    EXPECT_EQ(mk::max_abs(xs[0].data(), n), 1.0f);
    EXPECT_EQ(mk::max_abs(xs[0].data(), 0), 0.0f);
    for (int at : {0, 500, n - 1})
      for (float bad : {NAN, INFINITY, -INFINITY}) {
        std::vector<float> x = xs[1];
        x[size_t(at)] = bad;
        EXPECT_EQ(mk::max_abs(x.data(), n), INFINITY) << "at " << at;
      }
  });
}

// The mirror writes the strict lower triangle from the upper one and touches nothing else (the
// upper triangle, the diagonal, the columns past n of a wider leading dimension), on every target
// and on sizes around its 4 × 4 blocks.
TEST(MirrorUpper, EveryIsaCopiesTheUpperTriangleAndNothingElse) {
  for_each_isa([] {
    for (int n : {1, 2, 3, 4, 5, 8, 11, 37, 128}) {
      const int ldc = n + 3;
      std::vector<float> C(size_t(n) * ldc);
      for (size_t i = 0; i < C.size(); ++i) C[i] = float(i) + 0.25f;
      std::vector<double> Cd(C.begin(), C.end());
      const std::vector<float> before = C;
      mk::mirror_upper(C.data(), n, ldc);
      mk::mirror_upper(Cd.data(), n, ldc);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < ldc; ++j) {
          const size_t at = size_t(i) * ldc + j;
          const float want = j < i ? before[size_t(j) * ldc + i] : before[at];
          ASSERT_EQ(C[at], want) << "n " << n << " at " << i << "," << j;
          ASSERT_EQ(Cd[at], double(want)) << "double, n " << n << " at " << i << "," << j;
        }
    }
  });
}

// The symmetric product (Newton–Schulz's X·Xᵀ and A·A) writes all of C and equals the GEMM.
TEST(Syrk, EqualsTheGemmOfAWithItsTransposeWholeMatrix) {
  const int n = 37, k = 53;
  const Vec A = randn(n * k, 21), At = [&] {
    Vec t(k * n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < k; ++j) t[size_t(j * n + i)] = A[size_t(i * k + j)];
    return t;
  }();
  Vec C0 = randn(n * n, 22);  // symmetric, for beta = 1
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < i; ++j) C0[size_t(i * n + j)] = C0[size_t(j * n + i)];
  for (bool trans : {false, true})
    for (double beta : {0.0, 1.0}) {
      Vec want = C0, got = C0;
      mk::gemm<double>(false, true, n, n, k, 0.7, A.data(), k, A.data(), k, beta, want.data(), n);
      if (trans)
        mk::syrk<double>(true, n, k, 0.7, At.data(), n, beta, got.data(), n);
      else
        mk::syrk<double>(false, n, k, 0.7, A.data(), k, beta, got.data(), n);
      EXPECT_LT(rel_err(got, want), 1e-14) << "trans " << trans << " beta " << beta;
      // float: OpenBLAS's ssyrk, or oneDNN's full product mirrored where OpenBLAS is told a
      // narrower core than the CPU's (ctest runs this test under both core types).
      std::vector<float> Af(A.begin(), A.end()), Atf(At.begin(), At.end()),
          Cf(C0.begin(), C0.end());
      if (trans)
        mk::syrk<float>(true, n, k, 0.7f, Atf.data(), n, float(beta), Cf.data(), n);
      else
        mk::syrk<float>(false, n, k, 0.7f, Af.data(), k, float(beta), Cf.data(), n);
      EXPECT_LT(rel_err(Vec(Cf.begin(), Cf.end()), want), 1e-5)
          << "float, trans " << trans << " beta " << beta;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < i; ++j)
          ASSERT_EQ(Cf[size_t(i * n + j)], Cf[size_t(j * n + i)]) << "not symmetric at " << i;
    }
}
