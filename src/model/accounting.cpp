#include "model/accounting.hpp"

#include <cmath>

namespace marin {

int64_t core_params(const ModelConfig& c, int64_t k) {
  const int64_t d = c.hidden_dim, H = c.num_heads, hd = c.head_dim, kv = c.kv_heads_local;
  const int64_t l = c.latent_dim;
  return 2 * d * H * hd + 2 * d * kv * hd + d * c.num_experts + k * 3 * l * c.expert_dim +
         2 * d * l + c.num_shared_experts * 3 * d * c.shared_dim;
}

int64_t every_tensor_params(const ModelConfig& c) {
  const int64_t d = c.hidden_dim, r = c.gated_norm_rank, k = c.sconv_kernel;
  const int64_t gnorm = d + 2 * d * r;  // RMSNorm gain + GatedNorm down/up
  int64_t per_layer = 2 * gnorm + d * c.num_heads /*head gate*/ + c.num_experts /*router bias*/ +
                      c.latent_dim /*latent gain*/;
  if (c.has_sconv("k")) per_layer += k * c.kv_dim();
  if (c.has_sconv("attn")) per_layer += k * d;
  if (c.has_sconv("mlp")) per_layer += k * d;
  return c.num_layers * (core_params(c, c.num_experts) + per_layer) +
         2 * c.vocab_size * d /*embedding + head*/ + 2 * gnorm /*embed + final norms*/;
}

int64_t forward_flops_per_token(const ModelConfig& c) {
  const int64_t d = c.hidden_dim, H = c.num_heads, hd = c.head_dim, K = c.top_k;
  const int64_t L = c.num_layers, S = c.seq_len, W = c.sliding_window, l = c.latent_dim;
  const int64_t mlp = 6 * d * c.expert_dim * K + 6 * d * c.shared_dim * c.num_shared_experts +
                      2 * d * c.num_experts;
  auto qkv = [&](int64_t kv) { return 2 * d * (H * hd + 2 * kv * hd); };
  auto attn = [&](int64_t n) { return 2 * n * H * hd + 3 * n * H + 2 * n * hd * H; };
  // Marin's estimator counts g = L // global_every global layers (not the "+ last layer" rule).
  const int64_t g = L / c.global_every;
  int64_t f = L * (mlp + 2 * d * d) + g * (qkv(c.kv_heads_global) + attn(S)) +
              (L - g) * (qkv(c.kv_heads_local) + attn(W)) + 2 * d * c.vocab_size;
  f += L * (6 * c.expert_dim * K * (l - d) + 4 * d * l);
  return f;
}

Accounting account(const ModelConfig& c) {
  Accounting a;
  a.active_params = c.num_layers * core_params(c, c.top_k);
  a.headline_params =
      c.num_layers * core_params(c, c.num_experts) + 2 * c.vocab_size * c.hidden_dim;
  a.every_tensor = every_tensor_params(c);
  a.fwd_flops_per_token = forward_flops_per_token(c);
  a.fwd_flops_no_head = a.fwd_flops_per_token - 2 * c.hidden_dim * c.vocab_size;
  return a;
}

double training_flops(const ModelConfig& c, int64_t batch, int64_t steps) {
  return 3.0 * static_cast<double>(forward_flops_per_token(c)) * static_cast<double>(c.seq_len) *
         static_cast<double>(batch) * static_cast<double>(steps);
}

double forecast_flops_per_step(const ModelConfig& c, int64_t batch) {
  return 3.0 * static_cast<double>(account(c).fwd_flops_no_head) * static_cast<double>(c.seq_len) *
         static_cast<double>(batch);
}

int64_t steps_for_budget(const ModelConfig& c, int64_t batch, double tokens_per_param) {
  const double tpb = static_cast<double>(batch * c.seq_len);
  return std::llround(tokens_per_param * static_cast<double>(account(c).active_params) / tpb);
}

}  // namespace marin
