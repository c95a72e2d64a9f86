#include "model/accounting.hpp"

#include <fmt/format.h>

#include <cmath>

#include "core/limits.hpp"

namespace marin {

namespace {

// The sizes that multiply into the counts below, for an overflow's message.
std::string sizes(const ModelConfig& c) {
  return fmt::format(
      "num_layers = {}, hidden_dim = {}, num_experts = {}, latent_dim = {}, expert_dim = {}, "
      "num_shared_experts = {}, shared_dim = {}, vocab_size = {}, seq_len = {}",
      c.num_layers, c.hidden_dim, c.num_experts, c.latent_dim, c.expert_dim, c.num_shared_experts,
      c.shared_dim, c.vocab_size, c.seq_len);
}

// The formulas of recipe.md §6 in Checked arithmetic (core/limits.hpp); the public functions
// turn an overflow into an error naming the count.
Checked core(const ModelConfig& c, Checked k) {
  const Checked d = c.hidden_dim, H = c.num_heads, hd = c.head_dim, kv = c.kv_heads_local;
  const Checked l = c.latent_dim;
  return 2 * d * H * hd + 2 * d * kv * hd + d * c.num_experts + k * 3 * l * c.expert_dim +
         2 * d * l + Checked(c.num_shared_experts) * 3 * d * c.shared_dim;
}

Checked every_tensor(const ModelConfig& c) {
  const Checked d = c.hidden_dim, r = c.gated_norm_rank, k = c.sconv_kernel;
  const Checked gnorm = d + 2 * d * r;  // RMSNorm gain + GatedNorm down/up
  Checked per_layer = 2 * gnorm + d * c.num_heads /*head gate*/ + c.num_experts /*router bias*/ +
                      c.latent_dim /*latent gain*/;
  if (c.has_sconv("k")) per_layer += k * c.kv_dim();
  if (c.has_sconv("attn")) per_layer += k * d;
  if (c.has_sconv("mlp")) per_layer += k * d;
  return Checked(c.num_layers) * (core(c, c.num_experts) + per_layer) +
         2 * Checked(c.vocab_size) * d /*embedding + head*/ + 2 * gnorm /*embed + final norms*/;
}

Checked forward_flops(const ModelConfig& c) {
  const Checked d = c.hidden_dim, H = c.num_heads, hd = c.head_dim, K = c.top_k;
  const Checked L = c.num_layers, S = c.seq_len, W = c.sliding_window, l = c.latent_dim;
  const Checked mlp = 6 * d * c.expert_dim * K + 6 * d * c.shared_dim * c.num_shared_experts +
                      2 * d * c.num_experts;
  auto qkv = [&](Checked kv) { return 2 * d * (H * hd + 2 * kv * hd); };
  auto attn = [&](Checked n) { return 2 * n * H * hd + 3 * n * H + 2 * n * hd * H; };
  // Marin's estimator counts g = L // global_every global layers (not the "+ last layer" rule).
  const Checked g = c.num_layers / c.global_every;
  Checked f = L * (mlp + 2 * d * d) + g * (qkv(c.kv_heads_global) + attn(S)) +
              (L - g) * (qkv(c.kv_heads_local) + attn(W)) + 2 * d * c.vocab_size;
  f += L * (6 * Checked(c.expert_dim) * K * (l - d) + 4 * d * l);
  return f;
}

}  // namespace

int64_t core_params(const ModelConfig& c, int64_t k) {
  return checked("the core parameter count", sizes(c), [&] { return core(c, k); });
}

int64_t every_tensor_params(const ModelConfig& c) {
  return checked("the parameter count of every tensor", sizes(c), [&] { return every_tensor(c); });
}

int64_t forward_flops_per_token(const ModelConfig& c) {
  return checked("forward FLOPs per token", sizes(c), [&] { return forward_flops(c); });
}

Accounting account(const ModelConfig& c) {
  Accounting a;
  const Checked L = c.num_layers, head = 2 * Checked(c.vocab_size) * c.hidden_dim;
  a.active_params = checked("active_params", sizes(c), [&] { return L * core(c, c.top_k); });
  a.headline_params = checked("the headline parameter count", sizes(c),
                              [&] { return L * core(c, c.num_experts) + head; });
  a.every_tensor = every_tensor_params(c);
  a.fwd_flops_per_token = forward_flops_per_token(c);
  a.fwd_flops_no_head = a.fwd_flops_per_token - head.get();
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
  const double tpb = static_cast<double>(batch) * static_cast<double>(c.seq_len);
  const double steps = tokens_per_param * static_cast<double>(account(c).active_params) / tpb;
  // llround of a value past 2^62 (or of NaN) is undefined: refuse it by name.
  if (!(steps >= 0 && steps < 0x1p62))
    fail("a budget of {} tokens per parameter gives {} steps at batch {} (expected 0 .. 2^62)",
         tokens_per_param, steps, batch);
  return std::llround(steps);
}

}  // namespace marin
