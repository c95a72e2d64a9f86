#include "model/attention.hpp"

#include <fmt/format.h>

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
void AttentionLayer<T>::forward(const T* x, const int32_t* seg, T* out, int B) {
  x_ = x;
  seg_ = seg;
  const i64 rows = i64(B) * S_, d = c_.hidden_dim, qd = c_.q_dim(), kd = c_.kv_dim();
  const i64 H = c_.num_heads, KV = c_.kv_heads_local, hd = c_.head_dim;
  const auto sh = shape(B);

  linear_fwd(x, wq_.w, q_raw_.data(), rows, d, qd);
  linear_fwd(x, wk_.w, k_pre_.data(), rows, d, kd);
  linear_fwd(x, wv_.w, v_.data(), rows, d, kd);
  // SConv on k over all stored channels, before the head split.
  if (sconv_k_.w)
    kernels::sconv_fwd(k_pre_.data(), sconv_k_.w, seg, k_raw_.data(), B, S_, int(kd),
                       int(c_.sconv_kernel));
  else
    std::copy(k_pre_.begin(), k_pre_.end(), k_raw_.begin());
  // QK-norm per head (no gain), then RoPE on local layers, then qk_mult on q.
  kernels::rmsnorm_fwd<T>(q_raw_.data(), nullptr, qf_.data(), rstd_q_.data(), rows * H, hd,
                          kQKNormEps);
  kernels::rmsnorm_fwd<T>(k_raw_.data(), nullptr, kf_.data(), rstd_k_.data(), rows * KV, hd,
                          kQKNormEps);
  if (!global_ && c_.rope_dim > 0) {
    kernels::rope(qf_.data(), B, S_, int(H), int(hd), qd, int(c_.rope_dim), c_.rope_theta, false);
    kernels::rope(kf_.data(), B, S_, int(KV), int(hd), kd, int(c_.rope_dim), c_.rope_theta, false);
  }
  const T qk = T(c_.qk_mult);
  T* qf = qf_.data();
  for (i64 i = 0; i < rows * qd; ++i) qf[i] *= qk;

  kernels::attention_fwd(sh, qf_.data(), kf_.data(), v_.data(), seg, y_.data(), lse_.data());

  // Head gate logits x @ A → σ, saved.
  T* sig = sig_.data();
  linear_fwd(x, gate_.w, sig, rows, d, H);
  const i64 group = H / sh.kv_used;
  const T *y = y_.data(), *v = v_.data();
  T *yx = y_xsa_.data(), *yg = y_gated_.data();
#pragma omp parallel for schedule(static)
  for (i64 t = 0; t < rows; ++t) {
    for (i64 h = 0; h < H; ++h) {
      const T* yh = y + t * qd + h * hd;
      const T* vh = v + t * kd + (h / group) * hd;
      T* oh = yx + t * qd + h * hd;
      // XSA: remove the component of y along the head's own value vector.
      T yv = 0, vv = 0;
      for (i64 i = 0; i < hd; ++i) yv += yh[i] * vh[i], vv += vh[i] * vh[i];
      const T coef = yv / (vv + T(kXsaEps));
      const T s = sigmoid(sig[t * H + h]);
      sig[t * H + h] = s;
      T* gh = yg + t * qd + h * hd;
      for (i64 i = 0; i < hd; ++i) {
        oh[i] = yh[i] - coef * vh[i];
        gh[i] = T(2) * s * oh[i];
      }
    }
  }
  linear_fwd(y_gated_.data(), wo_.w, out, rows, qd, d);
}

template <class T>
void AttentionLayer<T>::backward(const T* dout, T* dx, int B, Arena<T>& arena) {
  ArenaScope<T> scope(arena);
  const i64 rows = i64(B) * S_, d = c_.hidden_dim, qd = c_.q_dim(), kd = c_.kv_dim();
  const i64 H = c_.num_heads, KV = c_.kv_heads_local, hd = c_.head_dim;
  const auto sh = shape(B);
  const i64 group = H / sh.kv_used;

  T* dyg = arena.take(rows * qd);  // d(gated y)
  T* dy = arena.take(rows * qd);   // d(attention output, pre-XSA)
  T* dq = arena.take(rows * qd);
  T* dgl = arena.take(rows * H);  // d(gate logits)
  T* dk = arena.take(rows * kd);
  T* dv = arena.take(rows * kd);
  T* dv_xsa = arena.take_zeroed(rows * kd);
  T* dk2 = arena.take(rows * kd);

  linear_bwd(dout, y_gated_.data(), wo_.w, dyg, wo_.g, rows, qd, d);
  const T *y = y_.data(), *v = v_.data(), *yx = y_xsa_.data(), *sig = sig_.data();
#pragma omp parallel for schedule(static)
  for (i64 t = 0; t < rows; ++t) {
    for (i64 h = 0; h < H; ++h) {
      const T* g = dyg + t * qd + h * hd;
      const T* oh = yx + t * qd + h * hd;
      const T* yh = y + t * qd + h * hd;
      const T* vh = v + t * kd + (h / group) * hd;
      T* dvh = dv_xsa + t * kd + (h / group) * hd;
      T* dyh = dy + t * qd + h * hd;
      const T s = sig[t * H + h];
      // Gate: yg = 2 s · yx.
      T gsum = 0;
      for (i64 i = 0; i < hd; ++i) gsum += g[i] * oh[i];
      dgl[t * H + h] = gsum * T(2) * s * (T(1) - s);
      // XSA: yx = y − c·v, c = (y·v)/n, n = |v|² + eps.
      T yv = 0, vv = 0, gv = 0;
      for (i64 i = 0; i < hd; ++i) {
        const T dyx = T(2) * s * g[i];
        yv += yh[i] * vh[i];
        vv += vh[i] * vh[i];
        gv += dyx * vh[i];
      }
      const T n = vv + T(kXsaEps), c = yv / n;
      for (i64 i = 0; i < hd; ++i) {
        const T dyx = T(2) * s * g[i];
        dyh[i] = dyx - gv / n * vh[i];
        dvh[i] += -c * dyx - gv * (yh[i] / n - T(2) * c * vh[i] / n);
      }
    }
  }
  linear_bwd(dgl, x_, gate_.w, dx, gate_.g, rows, d, H);  // dx starts here (overwrite)

  kernels::attention_bwd(sh, qf_.data(), kf_.data(), v_.data(), seg_, y_.data(), lse_.data(), dy,
                         dq, dk, dv);
  for (i64 i = 0; i < rows * kd; ++i) dv[i] += dv_xsa[i];

  const T qk = T(c_.qk_mult);
  for (i64 i = 0; i < rows * qd; ++i) dq[i] *= qk;
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
