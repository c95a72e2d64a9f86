#pragma once
// One transformer block (recipe §2): pre-norm attention and MoE branches, each followed by its
// SConv site, added to the residual stream.
//   a = GN_attn(RMS_attn(h)); a = Attention(a); a = SConv_attn(a); h = h + a
//   m = GN_mlp(RMS_mlp(h));   m = MoE(m) + Σ_j Shared_j(m); m = SConv_mlp(m); h = h + m
#include <vector>

#include "model/attention.hpp"
#include "model/gated_norm.hpp"
#include "model/moe/moe_layer.hpp"

namespace marin {

template <class T>
class Block {
 public:
  Block(const Binder<T>& bind, const ModelConfig& c, int64_t layer, int B, int S,
        const ExpertPlacement<T>& experts = {});
  // h_in kept alive by the caller; h_out: [B·S, d]. Decoding (`at` set): B = at->rows tokens, one
  // per sequence at its own position, whose layer state (KV cache, SConv taps) is read and
  // extended.
  void forward(const T* h_in, const int32_t* seg, T* h_out, int B, const Dispatch& dispatch,
               const DecodeAt<T>* at = nullptr);
  // dh_in overwritten (may not alias dh_out).
  void backward(const T* dh_out, T* dh_in, int B, Arena<T>& arena);
  static i64 scratch(const ModelConfig& c, i64 rows, int expert_ranks = 1);

  MoELayer<T>& moe() { return moe_; }
  const MoELayer<T>& moe() const { return moe_; }

 private:
  ModelConfig c_;
  int S_;
  const int32_t* seg_ = nullptr;
  GatedRMSNorm<T> attn_norm_, mlp_norm_;
  AttentionLayer<T> attn_;
  MoELayer<T> moe_;
  std::vector<SwiGLUFFN<T>> shared_;
  Weight<T> sconv_attn_, sconv_mlp_;
  Buffer<T> a_in_, att_, h_mid_, m_in_, m_;
  std::vector<Buffer<T>> sh_a_, sh_b_, sh_h_;  // per shared expert saved activations
};

}  // namespace marin
