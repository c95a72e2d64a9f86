#include "eval/sampler.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "kernels/kernels.hpp"
#include "model/weights.hpp"

namespace marin {

// The epsilons of the full forward (docs/architecture.md): learnable norms 1e-5, QK-norm and XSA
// 1e-6.
constexpr double kNormEps = 1e-5;
constexpr double kQKNormEps = 1e-6;
constexpr double kXsaEps = 1e-6;

namespace {

// y[out] (+)= x[in] @ W[in, out], row-major W: one axpy per input (a gemv that stays in cache).
template <class T>
void matvec(const T* x, const T* W, T* y, i64 in, i64 out, bool accumulate = false) {
  if (!accumulate) std::fill(y, y + out, T(0));
  for (i64 i = 0; i < in; ++i) {
    const T xi = x[i];
    const T* w = W + i * out;
#pragma omp simd
    for (i64 o = 0; o < out; ++o) y[o] += xi * w[o];
  }
}

}  // namespace

// ---- sampling ----

template <class T>
int32_t sample_token(const T* logits, int64_t V, const SamplingOptions& o, Rng& rng,
                     const uint8_t* allowed) {
  auto ok = [&](int64_t i) { return !allowed || allowed[i]; };
  if (o.temperature <= 0 || o.top_k == 1) {
    int64_t best = -1;
    for (int64_t i = 0; i < V; ++i)
      if (ok(i) && (best < 0 || logits[i] > logits[best])) best = i;
    if (best < 0) fail("sampling: no token id is allowed");
    return int32_t(best);
  }
  thread_local std::vector<int32_t> ids;
  thread_local std::vector<double> prob;
  ids.clear();
  for (int64_t i = 0; i < V; ++i)
    if (ok(i)) ids.push_back(int32_t(i));
  if (ids.empty()) fail("sampling: no token id is allowed");
  // Most likely first, lower id first on ties (a total order, so the result is deterministic).
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t n = ids.size();
  const bool nucleus = o.top_p < 1.0;
  if (o.top_k > 0 && size_t(o.top_k) < n) {
    std::partial_sort(ids.begin(), ids.begin() + o.top_k, ids.end(), better);
    n = size_t(o.top_k);
  } else if (nucleus) {
    std::sort(ids.begin(), ids.end(), better);
  }
  double mx = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, double(logits[ids[i]]));
  prob.resize(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    prob[i] = std::exp((double(logits[ids[i]]) - mx) / o.temperature);
    total += prob[i];
  }
  if (nucleus) {
    // ids[0..n) are sorted: keep the shortest prefix whose mass reaches top_p (at least one).
    double cum = 0;
    size_t keep = 0;
    while (keep < n) {
      cum += prob[keep++];
      if (cum >= o.top_p * total) break;
    }
    n = keep;
    total = cum;
  }
  const double u = rng.uniform() * total;
  double cum = 0;
  for (size_t i = 0; i < n; ++i) {
    cum += prob[i];
    if (u < cum) return ids[i];
  }
  return ids[n - 1];  // u within round-off of total
}

template int32_t sample_token<float>(const float*, int64_t, const SamplingOptions&, Rng&,
                                     const uint8_t*);
template int32_t sample_token<double>(const double*, int64_t, const SamplingOptions&, Rng&,
                                      const uint8_t*);

size_t utf8_complete_prefix(std::string_view s) { return utf8::complete_prefix(s); }

// ---- the decoder ----

template <class T>
const T* Decoder<T>::W(const std::string& name) const {
  return params_ + table_.at(name).offset;
}

template <class T>
const T* Decoder<T>::W_opt(const std::string& name) const {
  const ParamInfo* p = table_.find(name);
  return p ? params_ + p->offset : nullptr;
}

template <class T>
Decoder<T>::Decoder(const ModelConfig& c, const ParamTable& table, const T* params)
    : c_(c), table_(table), params_(params) {
  c_.validate();
  if (c.top_k > 1024) fail("top_k {} is larger than the decoder supports (1024)", c.top_k);
  const i64 d = c.hidden_dim, r = c.gated_norm_rank, kd = c.kv_dim(), hd = c.head_dim;
  const i64 taps = std::max<i64>(c.sconv_kernel - 1, 0);
  auto norm = [&](const std::string& n, const std::string& g) {
    return Norm{W(n + ".weight"), W(g + ".down"), W(g + ".up")};
  };
  embed_ = W("embed.weight");
  head_ = W("lm_head");
  embed_norm_ = norm("embed.norm", "embed.gnorm");
  final_norm_ = norm("final.norm", "final.gnorm");
  layers_.resize(c.num_layers);
  for (i64 l = 0; l < c.num_layers; ++l) {
    Layer& L = layers_[l];
    const std::string p = fmt::format("layers.{}.", l);
    L.global = c.is_global(l);
    L.kv_used = L.global ? c.kv_heads_global : c.kv_heads_local;
    L.cap = L.global ? c.seq_len : std::min(c.sliding_window, c.seq_len);
    L.attn_norm = norm(p + "attn_norm", p + "attn_gnorm");
    L.mlp_norm = norm(p + "mlp_norm", p + "mlp_gnorm");
    L.wq = W(p + "attn.wq");
    L.wk = W(p + "attn.wk");
    L.wv = W(p + "attn.wv");
    L.wo = W(p + "attn.wo");
    L.gate = W(p + "attn.gate");
    L.sconv_k = W_opt(p + "attn.sconv_k");
    L.sconv_attn = W_opt(p + "sconv_attn");
    L.sconv_mlp = W_opt(p + "sconv_mlp");
    L.router = W(p + "moe.router");
    L.router_bias = W(p + "moe.router_bias");
    L.latent_down = W(p + "moe.latent_down");
    L.latent_norm = W(p + "moe.latent_norm");
    L.latent_up = W(p + "moe.latent_up");
    L.ex_gate = W(p + "moe.experts.w_gate");
    L.ex_up = W(p + "moe.experts.w_up");
    L.ex_down = W(p + "moe.experts.w_down");
    for (i64 j = 0; j < c.num_shared_experts; ++j) {
      const std::string s = fmt::format("{}shared.{}.", p, j);
      L.sh_gate.push_back(W(s + "w_gate"));
      L.sh_up.push_back(W(s + "w_up"));
      L.sh_down.push_back(W(s + "w_down"));
    }
    L.kc.resize(L.cap * L.kv_used * hd);
    L.vc.resize(L.cap * L.kv_used * hd);
    if (L.sconv_k) L.tap_k.resize(taps * kd);
    if (L.sconv_attn) L.tap_attn.resize(taps * d);
    if (L.sconv_mlp) L.tap_mlp.resize(taps * d);
  }
  // RoPE angles exactly as kernels::rope computes them (double, then rounded to T).
  const i64 half = c.rope_dim / 2;
  rope_cos_.resize(c.seq_len * half);
  rope_sin_.resize(c.seq_len * half);
  for (i64 i = 0; i < half; ++i) {
    const double inv_freq = std::pow(c.rope_theta, -2.0 * double(i) / double(c.rope_dim));
    for (i64 p = 0; p < c.seq_len; ++p) {
      const double phi = double(p) * inv_freq;
      rope_cos_[p * half + i] = T(std::cos(phi));
      rope_sin_[p * half + i] = T(std::sin(phi));
    }
  }
  const i64 wide = std::max({d, r, kd, c.q_dim()});
  for (auto* b : {&h_, &a_, &b_, &t0_, &t1_}) b->resize(wide);
  q_.resize(c.q_dim());
  y_.resize(c.q_dim());
  k_.resize(kd);
  v_.resize(kd);
  scores_.resize(c.seq_len);
  gl_.resize(c.num_heads);
  route_.resize(c.num_experts);
  z_.resize(c.latent_dim);
  ze_.resize(c.latent_dim);
  const i64 ffn = std::max(c.expert_dim, c.shared_dim);
  for (auto* b : {&eh_, &ea_, &eb_}) b->resize(ffn);
  logits_.resize(c.vocab_size);
}

template <class T>
void Decoder<T>::reset() {
  pos_ = 0;
  for (Layer& L : layers_)
    for (auto* b : {&L.kc, &L.vc, &L.tap_k, &L.tap_attn, &L.tap_mlp}) b->zero();
}

template <class T>
int64_t Decoder<T>::state_bytes() const {
  int64_t n = 0;
  for (const Layer& L : layers_)
    n += int64_t(L.kc.size() + L.vc.size() + L.tap_k.size() + L.tap_attn.size() + L.tap_mlp.size());
  return n * int64_t(sizeof(T));
}

// out = GN(RMS_g(x)) = r ⊙ σ(silu(r @ Wd) @ Wu), r = RMS_g(x). Uses t0_, t1_.
template <class T>
void Decoder<T>::gated_norm(const Norm& n, const T* x, T* out) {
  const i64 d = c_.hidden_dim, r = c_.gated_norm_rank;
  T rstd;
  kernels::rmsnorm_fwd<T>(x, n.gain, out, &rstd, 1, d, kNormEps);
  T* u = t0_.data();
  T* g = t1_.data();
  matvec(out, n.down, u, d, r);
  for (i64 i = 0; i < r; ++i) u[i] = u[i] * sigmoid(u[i]);
  matvec(u, n.up, g, r, d);
  for (i64 i = 0; i < d; ++i) out[i] = out[i] * sigmoid(g[i]);
}

template <class T>
void Decoder<T>::sconv(const T* w, Buffer<T>& ring, const T* x, T* out, int64_t C) {
  const i64 taps = c_.sconv_kernel - 1;
  for (i64 i = 0; i < C; ++i) out[i] = w[i] * x[i];
  for (i64 j = 1; j <= taps && j <= pos_; ++j) {
    const T* xs = ring.data() + ((pos_ - j) % taps) * C;
    const T* wj = w + j * C;
    for (i64 i = 0; i < C; ++i) out[i] += wj[i] * xs[i];
  }
  if (taps > 0) std::copy(x, x + C, ring.data() + (pos_ % taps) * C);
}

template <class T>
void Decoder<T>::attention(Layer& L, const T* x, T* out) {
  const i64 d = c_.hidden_dim, qd = c_.q_dim(), kd = c_.kv_dim(), H = c_.num_heads;
  const i64 hd = c_.head_dim, KV = L.kv_used, group = H / KV;
  const i64 p = pos_;
  T* q = q_.data();
  T* k = k_.data();
  T* v = v_.data();
  T* kpre = t0_.data();
  matvec(x, L.wq, q, d, qd);
  matvec(x, L.wk, kpre, d, kd);
  matvec(x, L.wv, v, d, kd);
  if (L.sconv_k)
    sconv(L.sconv_k, L.tap_k, kpre, k, kd);
  else
    std::copy(kpre, kpre + kd, k);
  // QK-norm per head (in place), RoPE on local layers at position p, qk_mult on q.
  T rs[1024];
  std::vector<T> rs_big;
  T* rstd = rs;
  if (H > 1024) rs_big.resize(H), rstd = rs_big.data();
  kernels::rmsnorm_fwd<T>(q, nullptr, q, rstd, H, hd, kQKNormEps);
  kernels::rmsnorm_fwd<T>(k, nullptr, k, rstd, KV, hd, kQKNormEps);
  const i64 half = c_.rope_dim / 2;
  if (!L.global && half > 0) {
    const T* cs = rope_cos_.data() + p * half;
    const T* sn = rope_sin_.data() + p * half;
    auto rot = [&](T* xh) {
      for (i64 i = 0; i < half; ++i) {
        const T x0 = xh[2 * i], x1 = xh[2 * i + 1];
        xh[2 * i] = x0 * cs[i] - x1 * sn[i];
        xh[2 * i + 1] = x1 * cs[i] + x0 * sn[i];
      }
    };
    for (i64 h = 0; h < H; ++h) rot(q + h * hd);
    for (i64 h = 0; h < KV; ++h) rot(k + h * hd);
  }
  const T qk = T(c_.qk_mult);
  for (i64 i = 0; i < qd; ++i) q[i] *= qk;

  // Cache this position's key and value (the heads attention reads).
  const i64 row = KV * hd, slot = p % L.cap;
  std::copy(k, k + row, L.kc.data() + slot * row);
  std::copy(v, v + row, L.vc.data() + slot * row);

  // Visible keys: t−W < j ≤ t on local layers, all j ≤ t on global ones.
  const i64 j0 = L.global ? 0 : std::max<i64>(0, p - c_.sliding_window + 1);
  const T scale = T(1) / std::sqrt(T(hd));
  T* sc = scores_.data();
  T* y = y_.data();
  matvec(x, L.gate, gl_.data(), d, H);
  for (i64 h = 0; h < H; ++h) {
    const i64 g = h / group;
    const T* qh = q + h * hd;
    T mx = -std::numeric_limits<T>::infinity();
    for (i64 j = j0; j <= p; ++j) {
      const T* kj = L.kc.data() + (j % L.cap) * row + g * hd;
      T s = 0;
      for (i64 i = 0; i < hd; ++i) s += qh[i] * kj[i];
      s *= scale;
      sc[j - j0] = s;
      mx = std::max(mx, s);
    }
    T sum = 0;
    for (i64 j = j0; j <= p; ++j) sum += (sc[j - j0] = std::exp(sc[j - j0] - mx));
    T* yh = y + h * hd;
    std::fill(yh, yh + hd, T(0));
    for (i64 j = j0; j <= p; ++j) {
      const T* vj = L.vc.data() + (j % L.cap) * row + g * hd;
      const T pj = sc[j - j0] / sum;
      for (i64 i = 0; i < hd; ++i) yh[i] += pj * vj[i];
    }
    // XSA with the head's own value vector at t, then the 2σ head gate.
    const T* vh = v + g * hd;
    T yv = 0, vv = 0;
    for (i64 i = 0; i < hd; ++i) yv += yh[i] * vh[i], vv += vh[i] * vh[i];
    const T coef = yv / (vv + T(kXsaEps));
    const T s = sigmoid(gl_[h]);
    for (i64 i = 0; i < hd; ++i) yh[i] = T(2) * s * (yh[i] - coef * vh[i]);
  }
  matvec(y, L.wo, out, qd, d);
}

template <class T>
void Decoder<T>::moe(Layer& L, const T* x, T* out) {
  const i64 d = c_.hidden_dim, l = c_.latent_dim, E = c_.num_experts, K = c_.top_k;
  const i64 ed = c_.expert_dim, sd = c_.shared_dim;
  // Router: top K+1 of s + b (ties → lower index); combine weights σ(s)·cs / (Σσ + 1e-9).
  T* s = route_.data();
  matvec(x, L.router, s, d, E);
  const T* b = L.router_bias;
  int32_t order_small[1024];
  std::vector<int32_t> order_big;
  int32_t* order = order_small;
  if (E > 1024) order_big.resize(E), order = order_big.data();
  std::iota(order, order + E, 0);
  std::partial_sort(order, order + std::min(K + 1, E), order + E, [&](int32_t a, int32_t c) {
    const T va = s[a] + b[a], vc = s[c] + b[c];
    return va > vc || (va == vc && a < c);
  });
  T wk[1024];
  T sum = 0;
  for (i64 k = 0; k < K; ++k) sum += (wk[k] = sigmoid(s[order[k]]));
  sum += T(1e-9);
  for (i64 k = 0; k < K; ++k) wk[k] = wk[k] * T(c_.combine_sum) / sum;

  // Latent: Z = RMS_latent(x @ Wld); routed experts in latent space; R @ Wlu.
  T* z = z_.data();
  T* R = t0_.data();
  T* ye = ze_.data();
  T *a = ea_.data(), *bb = eb_.data(), *h = eh_.data();
  matvec(x, L.latent_down, ye, d, l);
  T rstd;
  kernels::rmsnorm_fwd<T>(ye, L.latent_norm, z, &rstd, 1, l, kNormEps);
  std::fill(R, R + l, T(0));
  for (i64 k = 0; k < K; ++k) {
    const i64 e = order[k], m = l * ed;
    matvec(z, L.ex_gate + e * m, a, l, ed);
    matvec(z, L.ex_up + e * m, bb, l, ed);
    kernels::swiglu_fwd(a, bb, h, ed);
    matvec(h, L.ex_down + e * m, ye, ed, l);
    for (i64 i = 0; i < l; ++i) R[i] += wk[k] * ye[i];
  }
  matvec(R, L.latent_up, out, l, d);
  // Shared experts on the full-width input.
  for (size_t j = 0; j < L.sh_gate.size(); ++j) {
    matvec(x, L.sh_gate[j], a, d, sd);
    matvec(x, L.sh_up[j], bb, d, sd);
    kernels::swiglu_fwd(a, bb, h, sd);
    matvec(h, L.sh_down[j], out, sd, d, /*accumulate=*/true);
  }
}

template <class T>
const T* Decoder<T>::step(int32_t token) {
  const i64 d = c_.hidden_dim, V = c_.vocab_size;
  if (token < 0 || token >= V) fail("token id {} is outside the vocabulary [0, {})", token, V);
  if (pos_ >= c_.seq_len)
    fail("position {} is past the model's context (seq_len {})", pos_, c_.seq_len);
  T* h = h_.data();
  T* a = a_.data();
  T* b = b_.data();
  gated_norm(embed_norm_, embed_ + i64(token) * d, h);
  // The branch outputs go through their SConv into `a`, then join the residual stream.
  auto join = [&](const T* w, Buffer<T>& ring, const T* branch) {
    if (w) {
      T* tmp = t0_.data();
      sconv(w, ring, branch, tmp, d);
      for (i64 i = 0; i < d; ++i) h[i] += tmp[i];
    } else {
      for (i64 i = 0; i < d; ++i) h[i] += branch[i];
    }
  };
  for (Layer& L : layers_) {
    gated_norm(L.attn_norm, h, a);
    attention(L, a, b);
    join(L.sconv_attn, L.tap_attn, b);
    gated_norm(L.mlp_norm, h, a);
    moe(L, a, b);
    join(L.sconv_mlp, L.tap_mlp, b);
  }
  gated_norm(final_norm_, h, a);
  matvec(a, head_, logits_.data(), d, V);
  ++pos_;
  return logits_.data();
}

template <class T>
const T* Decoder<T>::prefill(const int32_t* tokens, int64_t n) {
  if (n <= 0) fail("prefill needs at least one token");
  for (int64_t i = 0; i < n; ++i) step(tokens[i]);
  return logits_.data();
}

template class Decoder<float>;
template class Decoder<double>;

}  // namespace marin
