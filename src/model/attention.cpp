#include "model/attention.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "kernels/threads.hpp"

namespace marin {

constexpr double kQKNormEps = 1e-6;  // rms() without gain, recipe notation
constexpr double kXsaEps = 1e-6;

template <class T>
AttentionLayer<T>::AttentionLayer(const Binder<T>& bind, const ModelConfig& c, int64_t layer, int B,
                                  int S)
    : c_(c), global_(c.is_global(layer)), S_(S) {
  const std::string p = fmt::format("layers.{}.attn.", layer);
  wq_ = bind(p + "wq");
  wk_ = bind(p + "wk");
  wv_ = bind(p + "wv");
  wo_ = bind(p + "wo");
  gate_ = bind(p + "gate");
  sconv_k_ = bind.optional(p + "sconv_k");
  const i64 rows = i64(B) * S, qd = c.q_dim(), kd = c.kv_dim(), H = c.num_heads;
  for (auto* b : {&q_raw_, &qf_, &y_, &y_xsa_, &y_gated_}) b->resize(rows * qd);
  for (auto* b : {&k_pre_, &k_raw_, &v_, &kf_}) b->resize(rows * kd);
  rstd_q_.resize(rows * H);
  rstd_k_.resize(rows * c.kv_heads_local);
  lse_.resize(rows * H);
  sig_.resize(rows * H);
}

template <class T>
kernels::AttnShape AttentionLayer<T>::shape(int B) const {
  kernels::AttnShape s;
  s.B = B;
  s.S = S_;
  s.H = int(c_.num_heads);
  s.kv_stored = int(c_.kv_heads_local);
  s.kv_used = int(global_ ? c_.kv_heads_global : c_.kv_heads_local);
  s.hd = int(c_.head_dim);
  s.window = global_ ? 0 : int(c_.sliding_window);
  return s;
}

template <class T>
i64 AttentionLayer<T>::scratch(const ModelConfig& c, i64 rows) {
  return 4 * rows * c.q_dim() + 4 * rows * c.kv_dim() + rows * c.num_heads + 256;
}

template <class T>
kernels::XsaShape AttentionLayer<T>::xsa_shape(i64 rows) const {
  kernels::XsaShape s;
  s.rows = rows;
  s.H = c_.num_heads;
  s.hd = c_.head_dim;
  s.group = c_.num_heads / (global_ ? c_.kv_heads_global : c_.kv_heads_local);
  s.v_stride = c_.kv_dim();
  s.eps = kXsaEps;
  return s;
}

template <class T>
void AttentionLayer<T>::forward(const T* x, const int32_t* seg, T* out, int B,
                                const DecodeAt<T>* at) {
  x_ = x;
  seg_ = seg;
  const int S = at ? 1 : S_;
  MARIN_CHECK(!at || B == at->rows, "attention: decoding {} sequences, got {} rows",
              at ? at->rows : 0, B);
  const i64 rows = i64(B) * S, d = c_.hidden_dim, qd = c_.q_dim(), kd = c_.kv_dim();
  const i64 H = c_.num_heads, KV = c_.kv_heads_local, hd = c_.head_dim;

  linear_fwd(x, wq_.w, q_raw_.data(), rows, d, qd);
  linear_fwd(x, wk_.w, k_pre_.data(), rows, d, kd);
  linear_fwd(x, wv_.w, v_.data(), rows, d, kd);
  // SConv on k over all stored channels, before the head split.
  if (sconv_k_.w && at)
    for (i64 r = 0; r < rows; ++r)
      kernels::sconv_step(k_pre_.data() + r * kd, sconv_k_.w, at->caches[r]->tap_k.data(),
                          k_raw_.data() + r * kd, at->pos[r], int(kd), int(c_.sconv_kernel));
  else if (sconv_k_.w)
    kernels::sconv_fwd(k_pre_.data(), sconv_k_.w, seg, k_raw_.data(), B, S, int(kd),
                       int(c_.sconv_kernel));
  else
    std::copy(k_pre_.data(), k_pre_.data() + rows * kd, k_raw_.data());
  // QK-norm per head (no gain), then RoPE on local layers, then qk_mult on q.
  kernels::rmsnorm_fwd<T>(q_raw_.data(), nullptr, qf_.data(), rstd_q_.data(), rows * H, hd,
                          kQKNormEps);
  kernels::rmsnorm_fwd<T>(k_raw_.data(), nullptr, kf_.data(), rstd_k_.data(), rows * KV, hd,
                          kQKNormEps);
  if (!global_ && c_.rope_dim > 0) {
    // Decoding: each row is one token of its own sequence, at its own position.
    for (i64 r = 0; r < (at ? rows : 1); ++r) {
      const int b = at ? 1 : B;
      const i64 pos0 = at ? at->pos[r] : 0;
      kernels::rope(qf_.data() + r * qd, b, S, int(H), int(hd), qd, int(c_.rope_dim), c_.rope_theta,
                    false, pos0);
      kernels::rope(kf_.data() + r * kd, b, S, int(KV), int(hd), kd, int(c_.rope_dim),
                    c_.rope_theta, false, pos0);
    }
  }
  kernels::scale(qf_.data(), T(c_.qk_mult), rows * qd);

  if (at) {
    // Each row's key and value (the heads attention reads) join its sequence's cache, then its
    // query attends over every cached position it can see; the sequences are independent tasks.
    kernels::parallel_tasks(rows, [&](int64_t r, int) {
      LayerCache<T>& L = *at->caches[r];
      const i64 pos = at->pos[r], row = L.kv_used * hd, slot = pos % L.cap;
      std::copy(kf_.data() + r * kd, kf_.data() + r * kd + row, L.k.data() + slot * row);
      std::copy(v_.data() + r * kd, v_.data() + r * kd + row, L.v.data() + slot * row);
      kernels::DecodeAttnShape ds;
      ds.H = int(H);
      ds.kv_used = int(L.kv_used);
      ds.hd = int(hd);
      ds.window = global_ ? 0 : int(c_.sliding_window);
      ds.cap = L.cap;
      kernels::attention_decode(ds, qf_.data() + r * qd, L.k.data(), L.v.data(), pos,
                                y_.data() + r * qd);
    });
  } else {
    kernels::attention_fwd(shape(B), qf_.data(), kf_.data(), v_.data(), seg, y_.data(),
                           lse_.data());
  }

  // Head gate logits x @ A (σ in place), XSA, the gate.
  linear_fwd(x, gate_.w, sig_.data(), rows, d, H);
  kernels::xsa_gate_fwd(xsa_shape(rows), y_.data(), v_.data(), sig_.data(), y_xsa_.data(),
                        y_gated_.data());
  linear_fwd(y_gated_.data(), wo_.w, out, rows, qd, d);
}

template <class T>
void AttentionLayer<T>::backward(const T* dout, T* dx, int B, Arena<T>& arena) {
  ArenaScope<T> scope(arena);
  const i64 rows = i64(B) * S_, d = c_.hidden_dim, qd = c_.q_dim(), kd = c_.kv_dim();
  const i64 H = c_.num_heads, KV = c_.kv_heads_local, hd = c_.head_dim;
  const auto sh = shape(B);

  T* dyg = arena.take(rows * qd);  // d(gated y)
  T* dy = arena.take(rows * qd);   // d(attention output, pre-XSA)
  T* dq = arena.take(rows * qd);
  T* dgl = arena.take(rows * H);  // d(gate logits)
  T* dk = arena.take(rows * kd);
  T* dv = arena.take(rows * kd);
  T* dv_xsa = arena.take_zeroed(rows * kd);
  T* dk2 = arena.take(rows * kd);

  linear_bwd(dout, y_gated_.data(), wo_.w, dyg, wo_.g, rows, qd, d);
  kernels::xsa_gate_bwd(xsa_shape(rows), dyg, y_.data(), v_.data(), y_xsa_.data(), sig_.data(), dy,
                        dv_xsa, dgl);
  linear_bwd(dgl, x_, gate_.w, dx, gate_.g, rows, d, H);  // dx starts here (overwrite)

  kernels::attention_bwd(sh, qf_.data(), kf_.data(), v_.data(), seg_, y_.data(), lse_.data(), dy,
                         dq, dk, dv);
  kernels::add(dv, dv_xsa, dv, rows * kd);
  kernels::scale(dq, T(c_.qk_mult), rows * qd);
  if (!global_ && c_.rope_dim > 0) {
    kernels::rope(dq, B, S_, int(H), int(hd), qd, int(c_.rope_dim), c_.rope_theta, true);
    kernels::rope(dk, B, S_, int(KV), int(hd), kd, int(c_.rope_dim), c_.rope_theta, true);
  }
  // Through the QK-norms (dq reused as d q_raw; dk2 = d k_raw).
  T* dq_raw = dyg;  // dyg is no longer needed
  kernels::rmsnorm_bwd<T>(dq, q_raw_.data(), nullptr, rstd_q_.data(), dq_raw, nullptr, rows * H,
                          hd);
  kernels::rmsnorm_bwd<T>(dk, k_raw_.data(), nullptr, rstd_k_.data(), dk2, nullptr, rows * KV, hd);
  T* dk_pre = dk;
  if (sconv_k_.w)
    kernels::sconv_bwd(dk2, k_pre_.data(), sconv_k_.w, seg_, dk_pre, sconv_k_.g, B, S_, int(kd),
                       int(c_.sconv_kernel));
  else
    std::copy(dk2, dk2 + rows * kd, dk_pre);

  linear_bwd(dq_raw, x_, wq_.w, dx, wq_.g, rows, d, qd, true);
  linear_bwd(dk_pre, x_, wk_.w, dx, wk_.g, rows, d, kd, true);
  linear_bwd(dv, x_, wv_.w, dx, wv_.g, rows, d, kd, true);
}

template class AttentionLayer<float>;
template class AttentionLayer<double>;

}  // namespace marin
