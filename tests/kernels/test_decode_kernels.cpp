// The decoding kernels against the training kernels they stand in for, one position at a time:
// sconv_step against sconv_fwd, attention_decode over a KV ring against attention_fwd, and rope at
// a position offset against the same position of a whole row (docs/sampling.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gradcheck.hpp"
#include "isa_loop.hpp"
#include "kernels/kernels.hpp"

namespace mk = marin::kernels;
using Vec = std::vector<double>;
using namespace marin::testing;

TEST(DecodeKernels, SconvStepEqualsTheRowConvolution) {
  for (int k : {1, 2, 4}) {
    const int S = 11, C = 6;
    Vec x = randn(S * C, 1), w = randn(k * C, 2), y(S * C), ys(C);
    std::vector<int32_t> seg(S, 0);
    mk::sconv_fwd(x.data(), w.data(), seg.data(), y.data(), 1, S, C, k);
    Vec taps(std::max(k - 1, 0) * C, 0.0);
    for (int t = 0; t < S; ++t) {
      mk::sconv_step(x.data() + t * C, w.data(), taps.data(), ys.data(), t, C, k);
      for (int c = 0; c < C; ++c) EXPECT_EQ(ys[c], y[t * C + c]) << "k " << k << " t " << t;
    }
  }
}

TEST(DecodeKernels, AttentionOverARingEqualsTheFullForward) {
  // A local layer whose window (5) is shorter than the row (17), so the ring wraps, with GQA
  // 4:2 and two stored KV heads of which both are read; and a global one reading one of two.
  for (int window : {5, 0}) {
    mk::AttnShape s;
    s.S = 17;
    s.H = 4;
    s.kv_stored = 2;
    s.kv_used = window ? 2 : 1;
    s.hd = 8;
    s.window = window;
    const int qd = s.H * s.hd, kd = s.kv_stored * s.hd, used = s.kv_used * s.hd;
    Vec q = randn(s.S * qd, 3), k = randn(s.S * kd, 4), v = randn(s.S * kd, 5);
    Vec out(s.S * qd), lse(s.H * s.S), y(qd);
    std::vector<int32_t> seg(s.S, 0);
    mk::attention_fwd(s, q.data(), k.data(), v.data(), seg.data(), out.data(), lse.data());
    mk::DecodeAttnShape ds;
    ds.H = s.H;
    ds.kv_used = s.kv_used;
    ds.hd = s.hd;
    ds.window = window;
    ds.cap = window ? window : s.S;
    Vec kc(ds.cap * used), vc(ds.cap * used);
    double worst = 0;
    for (int t = 0; t < s.S; ++t) {
      std::copy(k.begin() + t * kd, k.begin() + t * kd + used, kc.begin() + (t % ds.cap) * used);
      std::copy(v.begin() + t * kd, v.begin() + t * kd + used, vc.begin() + (t % ds.cap) * used);
      mk::attention_decode(ds, q.data() + t * qd, kc.data(), vc.data(), t, y.data());
      for (int i = 0; i < qd; ++i) worst = std::max(worst, std::abs(y[i] - out[t * qd + i]));
    }
    EXPECT_LT(worst, 1e-13) << "window " << window;
  }
}

// The float path (Highway, each SIMD target this CPU runs) against the double one over the same
// ring: head dims of 1, 2 and 8 vectors and one no target's lanes divide (the generic path), GQA
// groups of 4 and 8, a wrapped window and a global layer, positions from the first to past the
// window.
TEST(DecodeKernels, FloatAttentionEqualsDoubleOnEveryIsa) {
  marin::testing::for_each_isa([] {
    for (int hd : {16, 32, 128, 12})
      for (int window : {24, 0}) {
        mk::DecodeAttnShape ds;
        ds.H = 8;
        ds.kv_used = window ? 2 : 1;
        ds.hd = hd;
        ds.window = window;
        const int S = 40, row = ds.kv_used * hd;
        ds.cap = window ? window : S;
        const Vec q = randn(S * ds.H * hd, 6), k = randn(S * row, 7), v = randn(S * row, 8);
        Vec kc(ds.cap * row), vc(ds.cap * row), y(ds.H * hd);
        std::vector<float> qf(q.begin(), q.end()), kcf(kc.size()), vcf(vc.size()), yf(y.size());
        double worst = 0;
        for (int t = 0; t < S; ++t) {
          const int slot = int(t % ds.cap) * row;
          std::copy(k.begin() + t * row, k.begin() + (t + 1) * row, kc.begin() + slot);
          std::copy(v.begin() + t * row, v.begin() + (t + 1) * row, vc.begin() + slot);
          std::copy(kc.begin() + slot, kc.begin() + slot + row, kcf.begin() + slot);
          std::copy(vc.begin() + slot, vc.begin() + slot + row, vcf.begin() + slot);
          const int qo = t * ds.H * hd;
          mk::attention_decode(ds, q.data() + qo, kc.data(), vc.data(), t, y.data());
          mk::attention_decode(ds, qf.data() + qo, kcf.data(), vcf.data(), t, yf.data());
          for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(yf[i] - y[i]));
        }
        EXPECT_LT(worst, 2e-6) << "hd " << hd << " window " << window;
      }
  });
}

TEST(DecodeKernels, RopeAtAnOffsetEqualsThatPositionOfTheRow) {
  const int S = 9, H = 2, hd = 8, rope_dim = 6;
  Vec x = randn(S * H * hd, 6), row = x;
  mk::rope(row.data(), 1, S, H, hd, H * hd, rope_dim, 500.0, false);
  for (int t = 0; t < S; ++t) {
    Vec one(x.begin() + t * H * hd, x.begin() + (t + 1) * H * hd);
    mk::rope(one.data(), 1, 1, H, hd, H * hd, rope_dim, 500.0, false, t);
    for (int i = 0; i < H * hd; ++i) EXPECT_EQ(one[i], row[t * H * hd + i]) << t;
  }
}
