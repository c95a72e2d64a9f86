#pragma once
// Incremental decoding (recipe §2, one token at a time) and token sampling.
//
// Decoder<T> reads the weights of a model (a Model<T> or any flat parameter buffer laid out by a
// ParamTable) and keeps, per layer, exactly the state the full-sequence forward would read when it
// computes position p: a KV cache (local layers: a ring buffer of the last sliding_window
// positions; global layers: every position up to seq_len) and the last sconv_kernel−1 inputs of
// each SConv site (k, attention output, MoE output). step(token) then returns the logits the
// full forward computes at that position, for a single document (one segment id). See
// docs/sampling.md.
//
//   Model<float> m(cfg, 1); load_params(dir, m.table(), m.params().data());
//   Decoder<float> dec(m);
//   const float* logits = dec.prefill(prompt.data(), prompt.size());
//   Rng rng(seed);
//   int32_t next = sample_token(logits, cfg.vocab_size, SamplingOptions{0.8, 40, 0.95}, rng);
//   logits = dec.step(next);
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/buffer.hpp"
#include "core/rng.hpp"
#include "model/config.hpp"
#include "model/model.hpp"
#include "model/params.hpp"

namespace marin {

struct SamplingOptions {
  double temperature = 1.0;  // <= 0: greedy (argmax)
  int64_t top_k = 0;         // keep the k most likely tokens; 0: all. top_k = 1 is greedy.
  double top_p = 1.0;        // nucleus: smallest set of most likely tokens with mass >= top_p
};

// Chooses the next token from logits[V]. Greedy picks the argmax (lowest id on ties) and draws
// nothing from rng; otherwise exactly one rng.uniform() is drawn per call, so a fixed seed gives a
// fixed sequence. `allowed` (V flags, or null for all) excludes ids from the choice; at least one
// id must be allowed.
template <class T>
int32_t sample_token(const T* logits, int64_t V, const SamplingOptions& o, Rng& rng,
                     const uint8_t* allowed = nullptr);

// Length of the longest prefix of `s` that does not end inside a multi-byte UTF-8 sequence: what a
// streaming printer can write now (the rest waits for the next token's bytes).
size_t utf8_complete_prefix(std::string_view s);

template <class T>
class Decoder {
 public:
  // `params` (laid out by `table`, which must be built from `c`) must outlive the decoder; the
  // weights are read in place, never copied or modified.
  Decoder(const ModelConfig& c, const ParamTable& table, const T* params);
  explicit Decoder(const Model<T>& m) : Decoder(m.config(), m.table(), m.params().data()) {}

  // Forget the sequence (position 0, empty caches).
  void reset();
  // Runs one token at position position() and advances; returns its logits [vocab_size] (valid
  // until the next step/prefill/reset). Throws marin::Error when the position would reach
  // seq_len or the id is outside the vocabulary.
  const T* step(int32_t token);
  // step() over n >= 1 tokens; returns the logits of the last.
  const T* prefill(const int32_t* tokens, int64_t n);

  const T* logits() const { return logits_.data(); }
  int64_t position() const { return pos_; }
  int64_t capacity() const { return c_.seq_len; }
  const ModelConfig& config() const { return c_; }
  // Bytes of decoding state (KV caches + SConv taps), what docs/sampling.md reports.
  int64_t state_bytes() const;

 private:
  struct Norm {
    const T *gain = nullptr, *down = nullptr, *up = nullptr;
  };
  struct Layer {
    bool global = false;
    int64_t kv_used = 0;  // KV heads read by attention (kv_heads_local or kv_heads_global)
    int64_t cap = 0;      // cache rows: sliding_window (ring) or seq_len
    Norm attn_norm, mlp_norm;
    const T *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr, *gate = nullptr;
    const T *sconv_k = nullptr, *sconv_attn = nullptr, *sconv_mlp = nullptr;
    const T *router = nullptr, *router_bias = nullptr, *latent_down = nullptr,
            *latent_norm = nullptr, *latent_up = nullptr;
    const T *ex_gate = nullptr, *ex_up = nullptr, *ex_down = nullptr;
    std::vector<const T*> sh_gate, sh_up, sh_down;
    // State. k/v caches: [cap, kv_used·hd], row = position % cap. k is the attention key after
    // SConv, QK-norm and RoPE; v is the raw value projection.
    Buffer<T> kc, vc;
    // SConv taps: [k−1, C] rings, row = position % (k−1): the pre-SConv k projection (C = kv_dim),
    // the attention output (C = d) and the MoE + shared output (C = d).
    Buffer<T> tap_k, tap_attn, tap_mlp;
  };

  const T* W(const std::string& name) const;
  const T* W_opt(const std::string& name) const;
  void gated_norm(const Norm& n, const T* x, T* out);
  // out = Σ_j w_j·x_{p−j} with x_p = x, taps from `ring`; then x is pushed into the ring.
  void sconv(const T* w, Buffer<T>& ring, const T* x, T* out, int64_t C);
  void attention(Layer& L, const T* x, T* out);
  void moe(Layer& L, const T* x, T* out);

  ModelConfig c_;
  const ParamTable& table_;
  const T* params_;
  int64_t pos_ = 0;
  Norm embed_norm_, final_norm_;
  const T *embed_ = nullptr, *head_ = nullptr;
  std::vector<Layer> layers_;
  Buffer<T> rope_cos_, rope_sin_;  // [seq_len, rope_dim/2], angles computed in double
  // Per-token workspace.
  Buffer<T> h_, a_, b_, t0_, t1_, q_, k_, v_, y_, scores_, gl_, route_, z_, ze_, eh_, ea_, eb_,
      logits_;
};

}  // namespace marin
