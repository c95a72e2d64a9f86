// Every module's backward, and the whole `tiny` model with packed documents and both layer
// kinds, against central finite differences in double precision (relative error < 1e-6).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>

#include "gradcheck.hpp"
#include "kernels/threads.hpp"
#include "model/block.hpp"
#include "model/model.hpp"

using namespace marin;
using marin::testing::GradResult;
using marin::testing::GradTensor;

namespace {

constexpr double kTol = 1e-6;

// A double-precision parameter set for the `tiny` config with every tensor moved away from its
// special init (gains ≠ 1, gate ≠ 0, SConv ≠ identity) so no derivative is trivially zero.
struct Params {
  ModelConfig c;
  ParamTable table;
  Buffer<double> p, g;
  Binder<double> bind;
  Arena<double> arena;
  explicit Params(const ModelConfig& cfg)
      : c(cfg), table(cfg), p(table.total()), g(table.total()), bind{table, p.data(), g.data()} {
    table.initialize(p.data(), 3);
    Rng rng(11);
    for (auto& t : table.params()) {
      if (t.group == OptGroup::State) continue;
      const double scale = t.init == Init::Normal ? 0.0 : 0.3;
      for (int64_t i = 0; i < t.size; ++i) p[t.offset + i] += scale * rng.normal();
    }
    arena.reserve(1 << 24);
  }
  // The tensors whose names start with `prefix` (state tensors excluded).
  std::vector<GradTensor> tensors(const std::string& prefix) {
    std::vector<GradTensor> out;
    for (auto& t : table.params())
      if (t.name.rfind(prefix, 0) == 0 && t.group != OptGroup::State)
        out.push_back({t.name, p.data() + t.offset, g.data() + t.offset, t.size});
    return out;
  }
};

std::vector<int32_t> packed_segments(int B, int S) {
  // Row 0: three documents; row 1: two; row b>1: one.
  std::vector<int32_t> seg(size_t(B) * S, 0);
  for (int t = 0; t < S; ++t) {
    seg[t] = t < S / 3 ? 0 : (t < 3 * S / 4 ? 1 : 2);
    if (B > 1) seg[S + t] = t < S / 2 + 3 ? 0 : 1;
  }
  return seg;
}

std::vector<double> random_vec(size_t n, uint64_t seed, double scale = 1.0) {
  Rng r(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = scale * r.normal();
  return v;
}

double dot(const double* a, const double* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void expect_all_below(const std::vector<GradResult>& rs, const char* what) {
  ASSERT_FALSE(rs.empty());
  double worst = 0;
  for (auto& r : rs) worst = std::max(worst, r.rel_err);
  std::printf("%s: %zu tensors, worst relative error %.2e\n", what, rs.size(), worst);
  for (auto& r : rs) {
    EXPECT_LT(r.rel_err, kTol) << what << ": " << r.name << " (|grad| " << r.grad_norm << ", "
                               << r.checked << " elements)";
  }
}

// Checks a module with input x → out under L = Σ out ⊙ R: every parameter with `prefix` and x.
template <class Fwd, class Bwd>
void check_module(Params& P, const std::string& prefix, std::vector<double>& x, size_t out_size,
                  Fwd fwd, Bwd bwd, const char* what, int64_t max_per_tensor = 48) {
  std::vector<double> out(out_size), R = random_vec(out_size, 5), dx(x.size());
  auto loss = [&] {
    fwd(x.data(), out.data());
    return dot(out.data(), R.data(), out_size);
  };
  loss();
  P.g.zero();
  bwd(R.data(), dx.data());
  auto tensors = P.tensors(prefix);
  tensors.push_back({"input", x.data(), dx.data(), int64_t(x.size())});
  expect_all_below(marin::testing::gradcheck(loss, tensors, max_per_tensor), what);
}

}  // namespace

TEST(GradCheck, GatedRMSNorm) {
  Params P(ModelConfig::preset("tiny"));
  const i64 rows = 12, d = P.c.hidden_dim;
  GatedRMSNorm<double> n(P.bind, "layers.1.attn_norm", "layers.1.attn_gnorm", d,
                         P.c.gated_norm_rank, rows);
  auto x = random_vec(rows * d, 1);
  check_module(
      P, "layers.1.attn_", x, rows * d,
      [&](const double* in, double* out) { n.forward(in, out, rows); },
      [&](const double* dout, double* dx) { n.backward(dout, dx, rows, P.arena); }, "gated norm");
}

TEST(GradCheck, SharedSwiGLU) {
  Params P(ModelConfig::preset("tiny"));
  const i64 rows = 10, d = P.c.hidden_dim, h = P.c.shared_dim;
  auto g = P.bind("layers.0.shared.1.w_gate"), u = P.bind("layers.0.shared.1.w_up"),
       dn = P.bind("layers.0.shared.1.w_down");
  SwiGLUFFN<double> f{g.w, u.w, dn.w, g.g, u.g, dn.g, d, h};
  std::vector<double> a(rows * h), b(rows * h), hh(rows * h), scratch(3 * rows * h);
  auto x = random_vec(rows * d, 2);
  check_module(
      P, "layers.0.shared.1.", x, rows * d,
      [&](const double* in, double* out) {
        f.forward(in, rows, a.data(), b.data(), hh.data(), out, false);
      },
      [&](const double* dout, double* dx) {
        f.backward(dout, x.data(), rows, a.data(), b.data(), hh.data(), dx, false, scratch.data());
      },
      "shared expert");
}

class AttentionGrad : public ::testing::TestWithParam<int> {};

TEST_P(AttentionGrad, LocalAndGlobalWithPackedDocuments) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.seq_len = 40;
  c.sliding_window = 9;  // small window so it binds inside each document
  Params P(c);
  const int layer = GetParam();  // 0: local (RoPE, window), 3: global (full causal, kv_global)
  const int B = 2, S = int(c.seq_len);
  const i64 rows = i64(B) * S, d = c.hidden_dim;
  AttentionLayer<double> att(P.bind, c, layer, B, S);
  auto seg = packed_segments(B, S);
  auto x = random_vec(rows * d, 3);
  check_module(
      P, fmt::format("layers.{}.attn.", layer), x, rows * d,
      [&](const double* in, double* out) { att.forward(in, seg.data(), out, B); },
      [&](const double* dout, double* dx) { att.backward(dout, dx, B, P.arena); },
      c.is_global(layer) ? "global attention" : "local attention", 40);
}
INSTANTIATE_TEST_SUITE_P(Layers, AttentionGrad, ::testing::Values(0, 3));

class MoEGrad : public ::testing::TestWithParam<Transport> {};

TEST_P(MoEGrad, RouterLatentExperts) {
  Params P(ModelConfig::preset("tiny"));
  const i64 rows = 24, d = P.c.hidden_dim;
  MoELayer<double> moe(P.bind, P.c, 2, rows);
  // A non-zero QB bias changes the selection but must not enter the gradient.
  double* bias = moe.router().bias();
  for (int e = 0; e < P.c.num_experts; ++e) bias[e] = 0.05 * (e % 3);
  auto x = random_vec(rows * d, 4);
  const Transport tr = GetParam();
  check_module(
      P, "layers.2.moe.", x, rows * d,
      [&](const double* in, double* out) { moe.forward(in, out, rows, tr); },
      [&](const double* dout, double* dx) {
        std::fill(dx, dx + rows * d, 0.0);
        moe.backward(dout, dx, P.arena);
      },
      transport_name(tr));
  if (tr != Transport::Dropless) {
    EXPECT_GT(moe.plan().dropped, 0) << "the test should actually drop rows";
  }
}
INSTANTIATE_TEST_SUITE_P(Transports, MoEGrad,
                         ::testing::Values(Transport::Dropless, Transport::Capacity,
                                           Transport::Pooled));

// The experts' blocks run as parallel tasks (disjoint rows, scratch slices and gradients): at two
// and three threads the layer computes the one-thread bits (double: OpenBLAS, whose sums do not
// depend on the thread count), so a block writing another's rows or scratch would show here.
TEST_P(MoEGrad, ExpertsInParallelComputeTheOneThreadBits) {
  Params P(ModelConfig::preset("tiny"));
  const i64 rows = 96, d = P.c.hidden_dim;
  MoELayer<double> moe(P.bind, P.c, 1, rows);
  auto x = random_vec(rows * d, 5), dout = random_vec(rows * d, 6);
  const int before = marin::kernels::compute_threads();
  const bool chosen = marin::kernels::compute_threads_chosen();
  std::vector<std::vector<double>> outs, dxs, grads;
  for (int threads : {1, 2, 3}) {
    marin::kernels::set_compute_threads(threads, true);
    std::vector<double> out(rows * d), dx(rows * d, 0.0);
    P.g.zero();
    moe.forward(x.data(), out.data(), rows, GetParam());
    moe.backward(dout.data(), dx.data(), P.arena);
    outs.push_back(out), dxs.push_back(dx);
    grads.emplace_back(P.g.data(), P.g.data() + P.table.total());
  }
  marin::kernels::set_compute_threads(before, chosen);
  for (size_t i = 1; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i], outs[0]) << "output at " << i + 1 << " threads";
    EXPECT_EQ(dxs[i], dxs[0]) << "dx at " << i + 1 << " threads";
    EXPECT_EQ(grads[i], grads[0]) << "gradients at " << i + 1 << " threads";
  }
}

TEST(GradCheck, BlockWithSConvSites) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.seq_len = 24;
  c.sliding_window = 7;
  Params P(c);
  const int B = 2, S = int(c.seq_len);
  const i64 rows = i64(B) * S, d = c.hidden_dim;
  Block<double> blk(P.bind, c, 1, B, S);
  auto seg = packed_segments(B, S);
  auto x = random_vec(rows * d, 6);
  check_module(
      P, "layers.1.", x, rows * d,
      [&](const double* in, double* out) {
        blk.forward(in, seg.data(), out, B, Transport::Dropless);
      },
      [&](const double* dout, double* dx) { blk.backward(dout, dx, B, P.arena); }, "block", 24);
}

TEST(GradCheck, WholeTinyModelPackedDocuments) {
  ModelConfig c = ModelConfig::preset("tiny");  // layers 0-2 local, layer 3 global
  c.seq_len = 32;
  c.sliding_window = 8;
  // A larger init makes the logits (and so the gradients) large against the finite-difference
  // round-off of a loss near log V; the structure checked is the same.
  c.init_scale = 2.0;
  const int B = 2, S = int(c.seq_len);
  Model<double> m(c, B);
  m.init(5);
  Rng rng(9);
  for (auto& t : m.table().params()) {
    if (t.group == OptGroup::State) continue;
    const double scale = t.init == Init::Normal ? 0.0 : 0.3;
    for (int64_t i = 0; i < t.size; ++i) m.params()[t.offset + i] += scale * rng.normal();
  }
  std::vector<int32_t> tokens(B * S), labels(B * S);
  for (auto& t : tokens) t = int32_t(rng.next_u64() % c.vocab_size);
  for (int i = 0; i < B * S; ++i)
    labels[i] = i % 11 == 10 ? -1 : int32_t(rng.next_u64() % c.vocab_size);
  auto seg = packed_segments(B, S);
  Batch batch{B, tokens.data(), labels.data(), seg.data()};
  auto loss = [&] { return m.forward(batch).loss; };
  loss();
  m.backward();
  std::vector<GradTensor> tensors;
  for (auto& t : m.table().params())
    if (t.group != OptGroup::State)
      tensors.push_back(
          {t.name, m.params().data() + t.offset, m.grads().data() + t.offset, t.size});
  auto results = marin::testing::gradcheck(loss, tensors, 12);
  expect_all_below(results, "tiny model");
  // Every tensor of the table took part (nothing silently skipped).
  EXPECT_EQ(results.size(), tensors.size());
  // The QB bias never receives gradient.
  for (int l = 0; l < c.num_layers; ++l) {
    const auto& p = m.table().at(fmt::format("layers.{}.moe.router_bias", l));
    for (int64_t i = 0; i < p.size; ++i) EXPECT_EQ(m.grads()[p.offset + i], 0.0);
  }
}
