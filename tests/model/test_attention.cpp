// Attention: forward against a naive reference that materialises the masked score matrix (double),
// backward against central finite differences (double), and the float kernels (SIMD tiles, on
// every target the CPU supports) against the double results on shapes that hit every masking case.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gradcheck.hpp"
#include "isa_loop.hpp"
#include "kernels/kernels.hpp"

namespace mk = marin::kernels;
using Vec = std::vector<double>;
using namespace marin::testing;

namespace {

// Segment ids: row b gets documents of varying lengths (several per row when `packed`). With
// `recur`, ids alternate between two values, so an id reappears after another document: the
// mask compares ids, so such keys are visible again (the kernels must not assume runs).
std::vector<int32_t> make_seg(int B, int S, bool packed, uint64_t seed, bool recur = false) {
  std::mt19937_64 g(seed);
  std::vector<int32_t> seg(size_t(B) * S);
  for (int b = 0; b < B; ++b) {
    int id = 100 * b, left = packed ? 1 + int(g() % (S / 2 + 1)) : S;
    for (int t = 0; t < S; ++t) {
      if (left == 0) ++id, left = 1 + int(g() % (S / 2 + 1));
      seg[size_t(b) * S + t] = recur ? id % 2 : id;
      --left;
    }
  }
  return seg;
}

// Naive attention: full masked score matrix per (b, h), softmax, weighted sum.
void attn_ref(const mk::AttnShape& s, const Vec& q, const Vec& k, const Vec& v,
              const std::vector<int32_t>& seg, Vec& out, Vec& lse) {
  const int G = s.H / s.kv_used;
  const double scale = 1 / std::sqrt(double(s.hd));
  out.assign(size_t(s.B) * s.S * s.H * s.hd, 0);
  lse.assign(size_t(s.B) * s.H * s.S, 0);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h) {
      const int kvh = h / G;
      std::vector<double> sc(size_t(s.S) * s.S, -INFINITY);
      for (int t = 0; t < s.S; ++t)
        for (int j = 0; j < s.S; ++j) {
          const bool vis =
              j <= t && seg[b * s.S + j] == seg[b * s.S + t] && (s.window == 0 || t - s.window < j);
          if (!vis) continue;
          double d = 0;
          for (int e = 0; e < s.hd; ++e)
            d += q[((size_t(b) * s.S + t) * s.H + h) * s.hd + e] *
                 k[((size_t(b) * s.S + j) * s.kv_stored + kvh) * s.hd + e];
          sc[size_t(t) * s.S + j] = d * scale;
        }
      for (int t = 0; t < s.S; ++t) {
        double m = -INFINITY, z = 0;
        for (int j = 0; j < s.S; ++j) m = std::max(m, sc[size_t(t) * s.S + j]);
        for (int j = 0; j < s.S; ++j) z += std::exp(sc[size_t(t) * s.S + j] - m);
        lse[(size_t(b) * s.H + h) * s.S + t] = m + std::log(z);
        for (int j = 0; j < s.S; ++j) {
          const double p = std::exp(sc[size_t(t) * s.S + j] - m) / z;
          if (p == 0) continue;
          for (int e = 0; e < s.hd; ++e)
            out[((size_t(b) * s.S + t) * s.H + h) * s.hd + e] +=
                p * v[((size_t(b) * s.S + j) * s.kv_stored + kvh) * s.hd + e];
        }
      }
    }
}

struct Case {
  std::string name;
  mk::AttnShape s;
  bool packed;
  bool recur = false;
};

std::vector<Case> cases(int hd, int S) {
  std::vector<Case> c;
  // B, S, H, kv_used, kv_stored, hd, window
  c.push_back({"causal", {2, S, 4, 2, 2, hd, 0}, false});
  c.push_back({"packed_causal", {2, S, 4, 2, 2, hd, 0}, true});
  c.push_back({"packed_window", {3, S, 4, 2, 2, hd, 5}, true});
  c.push_back({"window_unpacked", {1, S, 2, 1, 1, hd, 7}, false});
  c.push_back({"gqa_unused_heads", {2, S, 6, 1, 3, hd, 0}, true});
  c.push_back({"gqa_window_unused", {2, S, 4, 2, 3, hd, 4}, true});
  c.push_back({"recurring_ids", {2, S, 2, 1, 1, hd, 0}, true, true});
  c.push_back({"recurring_ids_window", {2, S, 2, 2, 2, hd, 9}, true, true});
  return c;
}

size_t qsize(const mk::AttnShape& s) {
  return size_t(s.B) * s.S * s.H * s.hd;
}
size_t kvsize(const mk::AttnShape& s) {
  return size_t(s.B) * s.S * s.kv_stored * s.hd;
}

}  // namespace

TEST(Attention, ForwardMatchesNaiveDouble) {
  for (int hd : {8, 32}) {
    for (const Case& c : cases(hd, 37)) {
      const auto& s = c.s;
      Vec q = randn(qsize(s), 1), k = randn(kvsize(s), 2), v = randn(kvsize(s), 3);
      auto seg = make_seg(s.B, s.S, c.packed, 4, c.recur);
      Vec out(qsize(s)), lse(size_t(s.B) * s.H * s.S), ro, rl;
      mk::attention_fwd(s, q.data(), k.data(), v.data(), seg.data(), out.data(), lse.data());
      attn_ref(s, q, k, v, seg, ro, rl);
      EXPECT_LT(rel_err(out, ro), 1e-13) << c.name << " hd=" << hd;
      EXPECT_LT(rel_err(lse, rl), 1e-13) << c.name << " hd=" << hd;
    }
  }
}

TEST(Attention, PackedSegmentsAreIsolated) {
  // Changing the keys/values of one document must not change another document's outputs.
  mk::AttnShape s{1, 20, 2, 1, 1, 8, 0};
  std::vector<int32_t> seg(20);
  for (int t = 0; t < 20; ++t) seg[t] = t < 9 ? 1 : 2;
  Vec q = randn(qsize(s), 5), k = randn(kvsize(s), 6), v = randn(kvsize(s), 7);
  Vec o1(qsize(s)), o2(qsize(s)), l(size_t(s.H) * s.S);
  mk::attention_fwd(s, q.data(), k.data(), v.data(), seg.data(), o1.data(), l.data());
  for (size_t i = 0; i < 9 * 8; ++i) k[i] += 1, v[i] -= 2;
  mk::attention_fwd(s, q.data(), k.data(), v.data(), seg.data(), o2.data(), l.data());
  for (size_t i = 9 * 16; i < o1.size(); ++i) EXPECT_EQ(o1[i], o2[i]);
  double diff = 0;
  for (size_t i = 0; i < 9 * 16; ++i) diff += std::abs(o1[i] - o2[i]);
  EXPECT_GT(diff, 1e-3);
  // First token of a document only sees itself: output is its own value.
  for (int h = 0; h < 2; ++h)
    for (int e = 0; e < 8; ++e) EXPECT_NEAR(o1[(9 * 2 + h) * 8 + e], v[9 * 8 + e] + 0, 1e-15);
}

TEST(Attention, BackwardFiniteDifferences) {
  for (const Case& c : cases(8, 11)) {
    const auto& s = c.s;
    Vec q = randn(qsize(s), 10), k = randn(kvsize(s), 11), v = randn(kvsize(s), 12);
    Vec R = randn(qsize(s), 13);
    auto seg = make_seg(s.B, s.S, c.packed, 14, c.recur);
    Vec out(qsize(s)), lse(size_t(s.B) * s.H * s.S);
    auto loss = [&] {
      mk::attention_fwd(s, q.data(), k.data(), v.data(), seg.data(), out.data(), lse.data());
      return dot(out, R);
    };
    loss();
    // Poison the outputs: every element must be overwritten.
    Vec dq(qsize(s), 9.0), dk(kvsize(s), 9.0), dv(kvsize(s), 9.0);
    mk::attention_bwd(s, q.data(), k.data(), v.data(), seg.data(), out.data(), lse.data(), R.data(),
                      dq.data(), dk.data(), dv.data());
    EXPECT_LT(rel_err(dq, fd_grad(q, loss)), 1e-6) << c.name;
    Vec fk = fd_grad(k, loss), fv = fd_grad(v, loss);
    EXPECT_LT(rel_err(dk, fk), 1e-6) << c.name;
    EXPECT_LT(rel_err(dv, fv), 1e-6) << c.name;
    for (size_t r = 0; r < size_t(s.B) * s.S; ++r)
      for (int e = s.kv_used * s.hd; e < s.kv_stored * s.hd; ++e) {
        ASSERT_EQ(dk[r * s.kv_stored * s.hd + e], 0.0) << c.name;
        ASSERT_EQ(dv[r * s.kv_stored * s.hd + e], 0.0) << c.name;
      }
  }
}

// Float kernels against the double kernels (themselves checked above). S = 150 is not a multiple
// of any tile size; windows span several key blocks.
TEST(Attention, FloatMatchesDouble) {
  // Every SIMD target this CPU supports, each against the double (generic) path.
  for_each_isa([&] {
    for (int hd : {16, 32, 64, 24}) {
      std::vector<Case> cs = cases(hd, 150);
      cs.push_back({"long_window", {2, 150, 4, 2, 2, hd, 70}, true});
      cs.push_back({"long_window_unpacked", {1, 150, 4, 1, 2, hd, 100}, false});
      for (const Case& c : cs) {
        const auto& s = c.s;
        Vec q = randn(qsize(s), 20, 1.5), k = randn(kvsize(s), 21, 1.5), v = randn(kvsize(s), 22);
        Vec dO = randn(qsize(s), 23);
        auto seg = make_seg(s.B, s.S, c.packed, 24, c.recur);
        Vec out(qsize(s)), lse(size_t(s.B) * s.H * s.S), dq(qsize(s)), dk(kvsize(s)), dv(kvsize(s));
        mk::attention_fwd(s, q.data(), k.data(), v.data(), seg.data(), out.data(), lse.data());
        mk::attention_bwd(s, q.data(), k.data(), v.data(), seg.data(), out.data(), lse.data(),
                          dO.data(), dq.data(), dk.data(), dv.data());
        auto qf = to_f(q), kf = to_f(k), vf = to_f(v), dOf = to_f(dO);
        std::vector<float> of(qsize(s)), lf(lse.size()), dqf(qsize(s), 5.f), dkf(kvsize(s), 5.f),
            dvf(kvsize(s), 5.f);
        mk::attention_fwd(s, qf.data(), kf.data(), vf.data(), seg.data(), of.data(), lf.data());
        mk::attention_bwd(s, qf.data(), kf.data(), vf.data(), seg.data(), of.data(), lf.data(),
                          dOf.data(), dqf.data(), dkf.data(), dvf.data());
        const std::string tag = c.name + " hd=" + std::to_string(hd);
        EXPECT_LT(rel_err(to_d(of), out), 1e-5) << tag;
        EXPECT_LT(rel_err(to_d(lf), lse), 1e-5) << tag;
        EXPECT_LT(rel_err(to_d(dqf), dq), 1e-5) << tag;
        EXPECT_LT(rel_err(to_d(dkf), dk), 1e-5) << tag;
        EXPECT_LT(rel_err(to_d(dvf), dv), 1e-5) << tag;
      }
    }
  });
}

TEST(Attention, FloatMatchesNaiveOnModelShape) {
  // Every SIMD target this CPU supports, each against the double (generic) path.
  for_each_isa([&] {
    // The benchmark shape family (hd = 32, 2 stored kv heads), window and global variants.
    for (int kv_used : {2, 1}) {
      mk::AttnShape s{2, 200, 8, kv_used, 2, 32, kv_used == 2 ? 64 : 0};
      Vec q = randn(qsize(s), 30), k = randn(kvsize(s), 31), v = randn(kvsize(s), 32);
      auto seg = make_seg(s.B, s.S, true, 33);
      Vec ro, rl;
      attn_ref(s, q, k, v, seg, ro, rl);
      auto qf = to_f(q), kf = to_f(k), vf = to_f(v);
      std::vector<float> of(qsize(s)), lf(rl.size());
      mk::attention_fwd(s, qf.data(), kf.data(), vf.data(), seg.data(), of.data(), lf.data());
      EXPECT_LT(rel_err(to_d(of), ro), 1e-5) << kv_used;
      EXPECT_LT(rel_err(to_d(lf), rl), 1e-5) << kv_used;
    }
  });
}

// The bf16 products (kernels.hpp, attention_bf16_supported: avx512_bf16, compute dtype bf16)
// against the fp32 kernels on the shapes above: local windows, global causal, GQA with unused
// stored heads, packed and recurring segment ids, every head dimension the kernels cover.
//
// The tolerance: bf16 keeps 8 significant bits, so each rounded input (q·scale, k, v, dO, and the
// p and dS of a block) is off by at most 2^-8 ≈ 0.4 % of itself, and a product of two by 2^-7.
// A score's error is a few 2^-8 of the size of its terms (|q|·|k|/√hd ≈ 2 here), p = exp(s − m)
// carries that error relative to itself, and the outputs and gradients, sums of many such terms
// with errors of both signs, come out a few 2^-8 off in norm (measured on a Zen 5: out ≤ 0.42 %,
// lse ≤ 0.16 %, dq, dk, dv ≤ 0.63 %). 4 · 2^-8 ≈ 1.6 % leaves room for other inputs without
// admitting a wrong mask or a lost term (those are O(1)).
TEST(Attention, Bf16ProductsMatchFp32WithinBf16Rounding) {
  std::string why;
  if (!mk::bf16_gemm_supported(&why)) GTEST_SKIP() << "the bf16 compute dtype needs " << why;
  if (!mk::attention_bf16_supported()) GTEST_SKIP() << "bf16 attention needs avx512_bf16";
  for (int hd : {16, 32, 64, 128}) {
    std::vector<Case> cs = cases(hd, 150);
    cs.push_back({"long_window_unpacked", {1, 150, 4, 1, 2, hd, 100}, false});
    cs.push_back({"global_unpacked", {1, 150, 4, 1, 2, hd, 0}, false});
    for (const Case& c : cs) {
      const auto& s = c.s;
      auto q = to_f(randn(qsize(s), 40, 1.5)), k = to_f(randn(kvsize(s), 41, 1.5)),
           v = to_f(randn(kvsize(s), 42)), dO = to_f(randn(qsize(s), 43));
      auto seg = make_seg(s.B, s.S, c.packed, 44, c.recur);
      std::vector<float> out[2], lse[2], dq[2], dk[2], dv[2];
      for (int bf : {0, 1}) {
        mk::DtypeScope dt(bf ? mk::Dtype::bf16 : mk::Dtype::fp32);
        out[bf].resize(qsize(s)), lse[bf].resize(size_t(s.B) * s.H * s.S);
        dq[bf].assign(qsize(s), 5.f), dk[bf].assign(kvsize(s), 5.f), dv[bf].assign(kvsize(s), 5.f);
        mk::attention_fwd(s, q.data(), k.data(), v.data(), seg.data(), out[bf].data(),
                          lse[bf].data());
        mk::attention_bwd(s, q.data(), k.data(), v.data(), seg.data(), out[bf].data(),
                          lse[bf].data(), dO.data(), dq[bf].data(), dk[bf].data(), dv[bf].data());
      }
      const std::string tag = c.name + " hd=" + std::to_string(hd);
      const double eo = rel_err(to_d(out[1]), to_d(out[0])),
                   el = rel_err(to_d(lse[1]), to_d(lse[0]));
      const double eq = rel_err(to_d(dq[1]), to_d(dq[0])), ek = rel_err(to_d(dk[1]), to_d(dk[0]));
      const double ev = rel_err(to_d(dv[1]), to_d(dv[0]));
      EXPECT_GT(eo, 0) << tag << ": the bf16 products did not run";
      constexpr double tol = 4.0 / 256;
      EXPECT_LT(eo, tol) << tag;
      EXPECT_LT(el, tol) << tag;
      EXPECT_LT(eq, tol) << tag;
      EXPECT_LT(ek, tol) << tag;
      EXPECT_LT(ev, tol) << tag;
      std::printf("%-22s out %.2e lse %.2e dq %.2e dk %.2e dv %.2e\n", tag.c_str(), eo, el, eq, ek,
                  ev);
      for (size_t r = 0; r < size_t(s.B) * s.S; ++r)
        for (int e = s.kv_used * s.hd; e < s.kv_stored * s.hd; ++e) {
          ASSERT_EQ(dk[1][r * s.kv_stored * s.hd + e], 0.0f) << tag;
          ASSERT_EQ(dv[1][r * s.kv_stored * s.hd + e], 0.0f) << tag;
        }
    }
  }
}

// Where the bf16 kernels do not run — a target without them (MARIN_ISA=avx2, the 128-bit
// baseline), or a CPU without avx512_bf16 — the bf16 compute dtype leaves attention's fp32
// kernels as they are: the same bits as fp32.
TEST(Attention, Bf16DtypeOnATargetWithoutBf16KernelsIsFp32) {
  std::string why;
  if (!mk::bf16_gemm_supported(&why)) GTEST_SKIP() << "the bf16 compute dtype needs " << why;
  for_each_isa([&] {
    if (mk::attention_bf16_supported()) return;  // an AVX-512 target of a CPU with avx512_bf16
    mk::AttnShape s{2, 150, 4, 2, 2, 32, 70};
    auto q = to_f(randn(qsize(s), 50)), k = to_f(randn(kvsize(s), 51)),
         v = to_f(randn(kvsize(s), 52)), dO = to_f(randn(qsize(s), 53));
    auto seg = make_seg(s.B, s.S, true, 54);
    std::vector<float> out[2], lse[2], dq[2], dk[2], dv[2];
    for (int bf : {0, 1}) {
      mk::DtypeScope dt(bf ? mk::Dtype::bf16 : mk::Dtype::fp32);
      out[bf].resize(qsize(s)), lse[bf].resize(size_t(s.B) * s.H * s.S);
      dq[bf].resize(qsize(s)), dk[bf].resize(kvsize(s)), dv[bf].resize(kvsize(s));
      mk::attention_fwd(s, q.data(), k.data(), v.data(), seg.data(), out[bf].data(),
                        lse[bf].data());
      mk::attention_bwd(s, q.data(), k.data(), v.data(), seg.data(), out[bf].data(), lse[bf].data(),
                        dO.data(), dq[bf].data(), dk[bf].data(), dv[bf].data());
    }
    EXPECT_EQ(out[0], out[1]);
    EXPECT_EQ(lse[0], lse[1]);
    EXPECT_EQ(dq[0], dq[1]);
    EXPECT_EQ(dk[0], dk[1]);
    EXPECT_EQ(dv[0], dv[1]);
  });
}
