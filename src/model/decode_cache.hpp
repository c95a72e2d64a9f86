#pragma once
// The state incremental decoding keeps between tokens (docs/sampling.md, "Cache layout"). The
// model's own modules read and extend it when Model::decode runs them on one token at its
// position, so decoding and training share one forward.
//
// Per layer: a KV cache of the heads attention reads — a ring of the last sliding_window
// positions on local layers (row j % cap holds position j), every position up to seq_len on
// global layers — and the last sconv_kernel − 1 inputs of each SConv site the layer has (rings of
// k − 1 rows: the pre-SConv key projection, the attention output, the MoE + shared output).
#include <vector>

#include "core/buffer.hpp"
#include "model/config.hpp"

namespace marin {

template <class T>
struct LayerCache {
  int64_t cap = 0;      // KV rows
  int64_t kv_used = 0;  // KV heads attention reads (kv_heads_local or kv_heads_global)
  Buffer<T> k, v;       // [cap, kv_used·head_dim]: k after SConv, QK-norm and RoPE; v as projected
  Buffer<T> tap_k, tap_attn, tap_mlp;  // [k − 1, C]; empty where the site is absent
};

// Where the tokens of a decoding forward sit: one row per sequence, each with its own position
// and its sequence's cache of this layer (rows of one call belong to different sequences, so
// prompts of any lengths decode together; Model::decode).
template <class T>
struct DecodeAt {
  LayerCache<T>* const* caches = nullptr;  // [rows]
  const int64_t* pos = nullptr;            // [rows]
  int64_t rows = 0;
};

template <class T>
struct DecodeCache {
  explicit DecodeCache(const ModelConfig& c);
  // Forget the sequence: position 0, every cache and tap zero.
  void reset();
  // Bytes of decoding state (KV caches + SConv taps), what docs/sampling.md reports.
  int64_t state_bytes() const;

  int64_t pos = 0;  // position of the next token
  std::vector<LayerCache<T>> layers;
  Buffer<T> logits;  // [vocab_size]: the logits of the last token decoded
};

}  // namespace marin
