#include "model/block.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/profile.hpp"

namespace marin {

template <class T>
Block<T>::Block(const Binder<T>& bind, const ModelConfig& c, int64_t layer, int B, int S,
                const ExpertPlacement<T>& experts)
    : c_(c), S_(S) {
  const i64 rows = i64(B) * S, d = c.hidden_dim, r = c.gated_norm_rank;
  const std::string p = fmt::format("layers.{}.", layer);
  attn_norm_ = GatedRMSNorm<T>(bind, p + "attn_norm", p + "attn_gnorm", d, r, rows);
  mlp_norm_ = GatedRMSNorm<T>(bind, p + "mlp_norm", p + "mlp_gnorm", d, r, rows);
  attn_ = AttentionLayer<T>(bind, c, layer, B, S);
  moe_ = MoELayer<T>(bind, c, layer, rows, experts);
  for (int64_t j = 0; j < c.num_shared_experts; ++j) {
    const std::string s = fmt::format("layers.{}.shared.{}.", layer, j);
    auto g = bind(s + "w_gate"), u = bind(s + "w_up"), dn = bind(s + "w_down");
    shared_.push_back({g.w, u.w, dn.w, g.g, u.g, dn.g, d, c.shared_dim});
    sh_a_.emplace_back(rows * c.shared_dim);
    sh_b_.emplace_back(rows * c.shared_dim);
    sh_h_.emplace_back(rows * c.shared_dim);
  }
  sconv_attn_ = bind.optional(p + "sconv_attn");
  sconv_mlp_ = bind.optional(p + "sconv_mlp");
  for (auto* b : {&a_in_, &att_, &h_mid_, &m_in_, &m_}) b->resize(rows * d);
}

template <class T>
i64 Block<T>::scratch(const ModelConfig& c, i64 rows, int expert_ranks) {
  const i64 d = c.hidden_dim;
  const i64 inner = std::max(
      {GatedRMSNorm<T>::scratch(d, c.gated_norm_rank, rows), AttentionLayer<T>::scratch(c, rows),
       MoELayer<T>::scratch(c, rows, expert_ranks), 3 * rows * c.shared_dim + 64});
  return 3 * rows * d + inner + 256;
}

// out = h + SConv(x) (or h + x without the site); conv input x is the saved activation. While
// decoding, each row's SConv reads and extends its sequence's tap ring of the site (`taps`).
template <class T>
static void residual_add(const T* h, const T* x, const Weight<T>& conv, const int32_t* seg, T* out,
                         int B, int S, i64 d, int k, const DecodeAt<T>* at,
                         Buffer<T> LayerCache<T>::*taps) {
  const i64 n = i64(B) * S * d;
  if (!conv.w) return kernels::add(h, x, out, n);
  if (at)
    for (i64 r = 0; r < at->rows; ++r)
      kernels::sconv_step(x + r * d, conv.w, (at->caches[r]->*taps).data(), out + r * d, at->pos[r],
                          int(d), k);
  else
    kernels::sconv_fwd(x, conv.w, seg, out, B, S, int(d), k);
  kernels::add(out, h, out, n);
}

template <class T>
void Block<T>::forward(const T* h_in, const int32_t* seg, T* h_out, int B, const Dispatch& dispatch,
                       const DecodeAt<T>* at) {
  seg_ = seg;
  const int S = at ? 1 : S_;
  const i64 rows = i64(B) * S, d = c_.hidden_dim;
  const int k = int(c_.sconv_kernel);
  {
    const profile::Scope ps("attention.forward");  // norm, projections, scores, XSA, gate
    attn_norm_.forward(h_in, a_in_.data(), rows);
    attn_.forward(a_in_.data(), seg, att_.data(), B, at);
  }
  {
    const profile::Scope ps("residual+sconv.forward");
    residual_add(h_in, att_.data(), sconv_attn_, seg, h_mid_.data(), B, S, d, k, at,
                 &LayerCache<T>::tap_attn);
  }
  {
    const profile::Scope ps("moe.forward");  // norm, router, latent projections, dispatch
    mlp_norm_.forward(h_mid_.data(), m_in_.data(), rows);
    moe_.forward(m_in_.data(), m_.data(), rows, dispatch);
  }
  {
    const profile::Scope ps("shared_experts.forward");
    for (size_t j = 0; j < shared_.size(); ++j)
      shared_[j].forward(m_in_.data(), rows, sh_a_[j].data(), sh_b_[j].data(), sh_h_[j].data(),
                         m_.data(), /*accumulate_y=*/true);
  }
  const profile::Scope ps("residual+sconv.forward");
  residual_add(h_mid_.data(), m_.data(), sconv_mlp_, seg, h_out, B, S, d, k, at,
               &LayerCache<T>::tap_mlp);
}

template <class T>
void Block<T>::backward(const T* dh_out, T* dh_in, int B, Arena<T>& arena) {
  ArenaScope<T> scope(arena);
  const i64 rows = i64(B) * S_, d = c_.hidden_dim, n = rows * d;
  const int k = int(c_.sconv_kernel);
  T* dh_mid = arena.take(n);
  T* dbranch = arena.take(n);  // gradient entering a branch (after its SConv)
  T* dnorm_in = arena.take(n);

  // MoE branch.
  const T* dm = dh_out;
  if (sconv_mlp_.w) {
    const profile::Scope ps("residual+sconv.backward");
    kernels::sconv_bwd(dh_out, m_.data(), sconv_mlp_.w, seg_, dbranch, sconv_mlp_.g, B, S_, int(d),
                       k);
    dm = dbranch;
  }
  std::fill(dnorm_in, dnorm_in + n, T(0));
  {
    const profile::Scope ps("moe.backward");
    moe_.backward(dm, dnorm_in, arena);
  }
  {
    const profile::Scope ps("shared_experts.backward");
    ArenaScope<T> inner(arena);
    T* s = arena.take(3 * rows * c_.shared_dim);
    for (size_t j = 0; j < shared_.size(); ++j)
      shared_[j].backward(dm, m_in_.data(), rows, sh_a_[j].data(), sh_b_[j].data(), sh_h_[j].data(),
                          dnorm_in, /*accumulate_dx=*/true, s);
  }
  {
    const profile::Scope ps("moe.backward");
    mlp_norm_.backward(dnorm_in, dh_mid, rows, arena);
    kernels::add(dh_mid, dh_out, dh_mid, n);
  }

  // Attention branch.
  const T* da = dh_mid;
  if (sconv_attn_.w) {
    const profile::Scope ps("residual+sconv.backward");
    kernels::sconv_bwd(dh_mid, att_.data(), sconv_attn_.w, seg_, dbranch, sconv_attn_.g, B, S_,
                       int(d), k);
    da = dbranch;
  }
  const profile::Scope ps("attention.backward");
  attn_.backward(da, dnorm_in, B, arena);
  attn_norm_.backward(dnorm_in, dh_in, rows, arena);
  kernels::add(dh_in, dh_mid, dh_in, n);
}

template class Block<float>;
template class Block<double>;

}  // namespace marin
