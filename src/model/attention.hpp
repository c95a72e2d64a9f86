#pragma once
// The attention sub-layer of one block (recipe §2, steps 1–10): projections, SConv on k,
// QK-norm, half-RoPE (local layers), qk_mult, windowed or full causal attention with segment ids,
// XSA, the 2σ head gate and the output projection.
#include "core/arena.hpp"
#include "core/buffer.hpp"
#include "model/config.hpp"
#include "model/decode_cache.hpp"
#include "model/weights.hpp"

namespace marin {

template <class T>
class AttentionLayer {
 public:
  AttentionLayer() = default;
  AttentionLayer(const Binder<T>& bind, const ModelConfig& c, int64_t layer, int B, int S);
  // x: [B·S, d] (kept alive by the caller), seg: [B, S]. out: [B·S, d].
  // Decoding (`at` set): B = at->rows tokens, one per sequence (seg unused), each at its own
  // position; a token's key and value join its sequence's cache and its query attends over the
  // cached positions it can see.
  void forward(const T* x, const int32_t* seg, T* out, int B, const DecodeAt<T>* at = nullptr);
  // dx overwritten.
  void backward(const T* dout, T* dx, int B, Arena<T>& arena);
  static i64 scratch(const ModelConfig& c, i64 rows);

 private:
  ModelConfig c_;
  bool global_ = false;
  int S_ = 0;
  Weight<T> wq_, wk_, wv_, wo_, gate_, sconv_k_;
  const T* x_ = nullptr;
  const int32_t* seg_ = nullptr;
  // Saved activations (see forward for what each is).
  Buffer<T> q_raw_, k_pre_, k_raw_, v_, rstd_q_, rstd_k_, qf_, kf_, y_, lse_, y_xsa_, sig_,
      y_gated_;
  kernels::AttnShape shape(int B) const;
  kernels::XsaShape xsa_shape(i64 rows) const;
};

}  // namespace marin
