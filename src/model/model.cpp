#include "model/model.hpp"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <type_traits>

#include "core/error.hpp"
#include "core/limits.hpp"
#include "core/profile.hpp"
#include "kernels/loss.hpp"
#include "parallel/comm.hpp"

namespace marin {

namespace {

// The configuration, validated before anything is sized from it.
const ModelConfig& validated(const ModelConfig& c) {
  c.validate();
  return c;
}

ExpertShard shard_of(parallel::Comm* experts) {
  return experts ? ExpertShard{experts->size(), experts->rank()} : ExpertShard{};
}

}  // namespace

// The parameter count, once the parameters, gradients and activations of this model are known to
// fit the machine's memory (refused before the first allocation, with the bytes they would need).
template <class T>
size_t Model<T>::admitted_params(const ParamTable& table, const ModelConfig& c, int max_batch,
                                 ModelUse use) {
  if (max_batch <= 0) fail("model workspace: max_batch must be positive, got {}", max_batch);
  const kernels::Dtype dtype = kernels::compute_dtype();
  const int64_t copy = weight_copy_bytes_bound(table, dtype, use);
  const int64_t bytes = checked(
      "the model's memory", fmt::format("{} parameters, batch {}", table.total(), max_batch), [&] {
        const int64_t copies = use == ModelUse::Training ? 2 : 1;
        return copies * Checked(int64_t(sizeof(T))) * table.total() + copy +
               activation_bytes(c, max_batch);
      });
  require_memory(
      bytes,
      fmt::format("the model ({} of {} parameters, {}activations of batch {} × seq_len {})",
                  use == ModelUse::Training ? "values and gradients" : "values", table.total(),
                  copy ? fmt::format("their {} copy, ", kernels::dtype_name(dtype)) : "", max_batch,
                  c.seq_len));
  return size_t(table.total());
}

template <class T>
int64_t Model<T>::weight_copy_bytes_bound(const ParamTable& table, kernels::Dtype d, ModelUse use) {
  if (!std::is_same_v<T, float>) return 0;
  using kernels::WeightCopy;
  return checked("the weight copy's memory", fmt::format("{} parameters", table.total()), [&] {
    Checked b = WeightCopy::copy_bytes(d, table.total());
    if (d != kernels::Dtype::bf16) return b;
    const int64_t layouts = use == ModelUse::Training ? 2 : 1;
    for (const ParamInfo& p : table.params())
      if (p.shape.size() >= 2)
        b += Checked(layouts) * (p.size / (p.rows() * p.cols())) *
             WeightCopy::layout_bytes_bound(p.rows(), p.cols());
    return b;
  });
}

template <class T>
Model<T>::Model(const ModelConfig& c, int max_batch, parallel::Comm* experts, ModelUse use)
    : cfg_(validated(c)),
      experts_(experts && experts->size() > 1 ? experts : nullptr),
      table_(c, shard_of(experts_)),
      max_batch_(max_batch),
      S_(int(c.seq_len)),
      params_(admitted_params(table_, c, max_batch, use)),
      grads_(use == ModelUse::Training ? table_.total() : 0),
      bind_{table_, params_.data(), grads_.size() ? grads_.data() : nullptr} {
  if constexpr (std::is_same_v<T, float>)
    weight_copy_ = std::make_unique<kernels::WeightCopy>(params_.data(), table_.total());
  const i64 rows = i64(max_batch) * S_, d = c.hidden_dim, r = c.gated_norm_rank;
  embed_norm_ = GatedRMSNorm<T>(bind_, "embed.norm", "embed.gnorm", d, r, rows);
  final_norm_ = GatedRMSNorm<T>(bind_, "final.norm", "final.gnorm", d, r, rows);
  ExpertPlacement<T> where;
  const int P = experts_ ? experts_->size() : 1;
  if (experts_) {
    where.group = experts_;
    where.region_begin = table_.expert_begin();
    if (use == ModelUse::Training) {
      source_grads_.resize(size_t(P) * size_t(expert_region_size()));
      for (int s = 0; s < P; ++s)
        where.source_grads.push_back(source_grads_.data() + s * expert_region_size());
    }
  }
  for (int64_t i = 0; i < c.num_layers; ++i)
    blocks_.push_back(std::make_unique<Block<T>>(bind_, c, i, max_batch, S_, where));
  const std::vector<int64_t> bounds = table_.unit_bounds();
  for (size_t u = 0; u + 1 < bounds.size(); ++u) units_.push_back({bounds[u], bounds[u + 1]});
  embed_.resize(rows * d);
  hs_.resize((c.num_layers + 1) * rows * d);
  hf_.resize(rows * d);
  logits_.resize(rows * c.vocab_size);
  lse_.resize(rows);
  ce_.resize(rows);
  tokens_.resize(rows);
  labels_.resize(rows);
  safe_labels_.resize(rows);
  seg_.resize(rows);
  arena_.reserve(3 * rows * d +
                 std::max(Block<T>::scratch(c, rows, P), GatedRMSNorm<T>::scratch(d, r, rows)));
}

template <class T>
Model<T>::~Model() = default;

template <class T>
int64_t Model<T>::activation_bytes(const ModelConfig& c, int batch) {
  // Mirrors the buffers the constructors above allocate (per token, then times rows), in checked
  // arithmetic (core/limits.hpp).
  return checked(
      "activation bytes",
      fmt::format("batch {} × seq_len {}, {} layers", batch, c.seq_len, c.num_layers), [&] {
        const Checked rows = Checked(batch) * c.seq_len, d = c.hidden_dim, r = c.gated_norm_rank;
        const Checked qd = Checked(c.num_heads) * c.head_dim,
                      kd = Checked(c.kv_heads_local) * c.head_dim;
        const Checked H = c.num_heads, l = c.latent_dim, K = c.top_k;
        const Checked norm = 1 + 2 * d + 2 * r;
        const Checked attn = 5 * qd + 4 * kd + H + c.kv_heads_local + 2 * H;
        const Checked moe = K * 4 + c.num_experts + 2 + 2 * l + 1 + 2 * K * l + l +
                            3 * K * c.expert_dim + 3 * K /*dispatch*/;
        const Checked block =
            2 * norm + attn + moe + 3 * Checked(c.num_shared_experts) * c.shared_dim + 5 * d;
        const Checked per_token =
            Checked(c.num_layers) * (block + d) + 2 * norm + 3 * d + c.vocab_size + 2;
        const Checked scratch = 3 * d + Block<T>::scratch(c, 1);
        return Checked(int64_t(sizeof(T))) * rows * (per_token + scratch) +
               Checked(int64_t(sizeof(int32_t))) * rows * 4;
      });
}

template <class T>
LossStats Model<T>::forward(const Batch& b) {
  if (b.B <= 0 || b.B > max_batch_)
    fail("batch of {} rows does not fit the model's workspace (1..{})", b.B, max_batch_);
  B_ = b.B;
  const i64 rows = i64(b.B) * S_, d = cfg_.hidden_dim, V = cfg_.vocab_size;
  int64_t count = 0;
  // seam: copies and validates the ids, counting the scored ones (integers, no tensor math)
  for (i64 i = 0; i < rows; ++i) {
    const int32_t t = b.tokens[i], lab = b.labels[i];
    if (t < 0 || t >= V)
      fail("token id {} at position {} is outside the vocabulary [0, {})", t, i, V);
    if (lab >= V) fail("label id {} at position {} is outside the vocabulary [0, {})", lab, i, V);
    tokens_[i] = t;
    labels_[i] = lab;
    safe_labels_[i] = lab < 0 ? 0 : lab;
    seg_[i] = b.seg ? b.seg[i] : 0;
    count += lab >= 0;
  }
  // A batch with nothing to score (validation padding) has zero loss and zero gradient.
  if (b.norm_tokens < 0 || (b.norm_tokens > 0 && b.norm_tokens < count))
    fail("norm_tokens {} is less than the {} scored tokens of the batch", b.norm_tokens, count);
  const int64_t norm = b.norm_tokens > 0 ? b.norm_tokens : count;
  inv_count_ = norm > 0 ? 1.0 / double(norm) : 0.0;

  // The bf16 copy of the weights: all of it now, or with a gate each unit as it is gathered (and
  // now the expert slices of an expert-parallel shard, which are not gated).
  const bool convert = !b.same_weights;
  if (convert && !gate_) refresh_weight_copy();
  if (convert && gate_ && weight_copy_)
    weight_copy_->refresh(table_.expert_begin(), table_.total());
  // Embedding lookup, then RMSNorm + GatedNorm (no scaling).
  {
    const profile::Scope ps("embedding.forward");
    acquire(0, Pass::Forward, convert);
    kernels::embedding_fwd(param("embed.weight"), tokens_.data(), embed_.data(), rows, d);
    embed_norm_.forward(embed_.data(), hs_.data(), rows);
    release(0);
  }
  for (size_t l = 0; l < blocks_.size(); ++l) {
    acquire(int(l) + 1, Pass::Forward, convert);
    blocks_[l]->forward(hs_.data() + l * rows * d, seg_.data(), hs_.data() + (l + 1) * rows * d, B_,
                        Dispatch{b.evaluation ? Transport::Dropless : dispatch_.transport,
                                 dispatch_.waves, dispatch_.group, experts_, dispatch_.thread});
    release(int(l) + 1);
  }
  const profile::Scope ps("lm_head+loss.forward");
  const int tail = int(units_.size()) - 1;
  acquire(tail, Pass::Forward, convert);
  final_norm_.forward(hs_.data() + blocks_.size() * rows * d, hf_.data(), rows);
  linear_fwd(hf_.data(), param("lm_head"), logits_.data(), rows, d, V);
  if (b.evaluation) release(tail);  // else kept: the backward starts with it
  kernels::xent_fwd(logits_.data(), safe_labels_.data(), lse_.data(), ce_.data(), rows, V);

  double ce = 0, z = 0;
  kernels::loss_sums(ce_.data(), lse_.data(), labels_.data(), rows, &ce, &z);
  LossStats s;
  s.tokens = count;
  if (count == 0) return s;
  s.ce = ce * inv_count_;
  s.z = z * inv_count_;
  s.loss = s.ce + cfg_.z_loss * s.z;
  return s;
}

template <class T>
void Model<T>::backward() {
  MARIN_CHECK(use() == ModelUse::Training,
              "backward() of a model built for inference (ModelUse::Inference has no gradients)");
  const i64 rows = i64(B_) * S_, d = cfg_.hidden_dim, V = cfg_.vocab_size;
  std::optional<profile::Scope> ps(std::in_place, "lm_head+loss.backward");
  if (gate_) gate_->prefetch(int(units_.size()) - 2);  // the last block, during the head's
  // Each unit's gradient is zeroed just before its backward (written, not accumulated, over the
  // step); the expert region of grads_ stays zero (source_grads_ holds the expert gradients).
  const auto zero_grads = [&](parallel::Range r) {
    kernels::zero(grads_.data() + r.begin, r.size());
  };
  zero_grads({table_.expert_begin(), table_.total()});
  kernels::zero(source_grads_.data(), i64(source_grads_.size()));
  ArenaScope<T> scope(arena_);
  // dlogits in place of the logits (they are not needed afterwards).
  T* dlogits = logits_.data();
  kernels::xent_bwd(logits_.data(), safe_labels_.data(), lse_.data(), dlogits, rows, V,
                    T(inv_count_), T(cfg_.z_loss * inv_count_));
  for (i64 i = 0; i < rows; ++i)
    if (labels_[i] < 0) std::fill(dlogits + i * V, dlogits + (i + 1) * V, T(0));
  T* dh = arena_.take(rows * d);
  T* dh2 = arena_.take(rows * d);
  const int tail = int(units_.size()) - 1;  // acquired by the forward
  zero_grads(units_[size_t(tail)]);
  linear_bwd(dlogits, hf_.data(), param("lm_head"), dh2, grad("lm_head"), rows, d, V);
  final_norm_.backward(dh2, dh, rows, arena_);
  release(tail);
  ps.reset();
  gradients_ready(units_[size_t(tail)]);
  for (size_t l = blocks_.size(); l-- > 0;) {
    const int u = int(l) + 1;
    acquire(u, Pass::Backward, false);
    zero_grads(units_[size_t(u)]);
    blocks_[l]->backward(dh, dh2, B_, arena_);
    release(u);
    std::swap(dh, dh2);
    gradients_ready(units_[size_t(u)]);
  }
  const profile::Scope pe("embedding.backward");
  acquire(0, Pass::Backward, false);
  zero_grads(units_[0]);
  embed_norm_.backward(dh, dh2, rows, arena_);
  kernels::embedding_bwd(dh2, tokens_.data(), grad("embed.weight"), rows, d);
  release(0);
  gradients_ready(units_[0]);
  // The router bias (QB state, group State) is left at the zero of grads_.zero(): no module
  // writes its gradient, which tests/model/test_qb.cpp checks.
}

template <class T>
void Model<T>::acquire(int u, Pass pass, bool convert) {
  if (!gate_) return;
  gate_->acquire(u, pass);
  if (convert && weight_copy_)
    weight_copy_->refresh(units_[size_t(u)].begin, units_[size_t(u)].end);
}

template <class T>
void Model<T>::set_gradient_listener(std::function<void(parallel::Range)> f) {
  gradients_ready_ = std::move(f);
}

template <class T>
const T* Model<T>::decode(int32_t token, DecodeCache<T>& cache) {
  DecodeCache<T>* one = &cache;
  decode(&token, &one, 1);
  return cache.logits.data();
}

template <class T>
void Model<T>::decode(const int32_t* tokens, DecodeCache<T>* const* caches, int64_t n) {
  const i64 d = cfg_.hidden_dim, V = cfg_.vocab_size;
  MARIN_CHECK(!gate_, "decode: the parameters are sharded (a training model with a ParamGate)");
  MARIN_CHECK(n >= 1 && n <= i64(max_batch_) * S_,
              "decode: {} sequences at once, the model holds at most {} rows", n,
              i64(max_batch_) * S_);
  bool first = false;
  std::vector<int64_t> pos(static_cast<size_t>(n));
  for (i64 i = 0; i < n; ++i) {
    const DecodeCache<T>& c = *caches[i];
    if (tokens[i] < 0 || tokens[i] >= V)
      fail("token id {} is outside the vocabulary [0, {})", tokens[i], V);
    if (c.pos >= cfg_.seq_len)
      fail("position {} is past the model's context (seq_len {})", c.pos, cfg_.seq_len);
    MARIN_CHECK(c.layers.size() == blocks_.size() && i64(c.logits.size()) == V,
                "decode: the cache was built for another model ({} layers)", c.layers.size());
    pos[size_t(i)] = c.pos;
    first = first || c.pos == 0;
  }
  // A decoder's weights never change while it runs (eval/sampler.hpp): converted when a sequence
  // starts, read by the rest.
  if (first && weight_copy_) weight_copy_->refresh_for_decoding();  // its gemv reads the plain copy
  // The n rows run through the training forward's own buffers (saved activations, which a
  // decoding call may overwrite), never logits_.
  T* x = embed_.data();
  T* h = hs_.data();
  T* h2 = hs_.data() + n * d;
  kernels::embedding_fwd(param("embed.weight"), tokens, x, n, d);
  embed_norm_.forward(x, h, n);
  std::vector<LayerCache<T>*> layer(static_cast<size_t>(n));
  for (size_t l = 0; l < blocks_.size(); ++l) {
    for (i64 i = 0; i < n; ++i) layer[size_t(i)] = &caches[i]->layers[l];
    const DecodeAt<T> at{layer.data(), pos.data(), n};
    blocks_[l]->forward(h, nullptr, h2, int(n), Dispatch{}, &at);
    std::swap(h, h2);
  }
  final_norm_.forward(h, hf_.data(), n);
  if (n == 1) {
    linear_fwd(hf_.data(), param("lm_head"), caches[0]->logits.data(), 1, d, V);
  } else {
    if (decode_logits_.size() < size_t(n * V)) decode_logits_.resize(size_t(n * V));
    linear_fwd(hf_.data(), param("lm_head"), decode_logits_.data(), n, d, V);
    for (i64 i = 0; i < n; ++i)
      std::copy(decode_logits_.data() + i * V, decode_logits_.data() + (i + 1) * V,
                caches[i]->logits.data());
  }
  for (i64 i = 0; i < n; ++i) ++caches[i]->pos;
}

template class Model<float>;
template class Model<double>;

}  // namespace marin
