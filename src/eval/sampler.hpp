#pragma once
// Incremental decoding (recipe §2, one token at a time) and token sampling.
//
// Decoder<T> owns a sequence's decoding state (model/decode_cache.hpp: per layer a KV cache —
// local layers a ring of the last sliding_window positions, global layers every position up to
// seq_len — and the last sconv_kernel−1 inputs of each SConv site) and runs each token through
// the model's own modules (Model::decode), so step(token) returns the logits the full forward
// computes at that position, for a single document (one segment id). The sampler has no model
// code of its own: only the token loop's state and the choice of the next token. See
// docs/sampling.md.
//
//   Model<float> m(cfg, 1, ModelUse::Inference); load_params(dir, m.table(), m.params().data());
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
  // `m` must outlive the decoder; its weights are read in place, never modified. Decoding
  // overwrites m's saved activations (not m.logits()), so a training step needs a new forward.
  explicit Decoder(Model<T>& m) : m_(m), cache_(m.config()) {}

  // Forget the sequence (position 0, empty caches).
  void reset() { cache_.reset(); }
  // Runs one token at position position() and advances; returns its logits [vocab_size] (valid
  // until the next step/prefill/reset). Throws marin::Error when the position would reach
  // seq_len or the id is outside the vocabulary.
  const T* step(int32_t token) { return m_.decode(token, cache_); }
  // step() over n >= 1 tokens; returns the logits of the last.
  const T* prefill(const int32_t* tokens, int64_t n);

  const T* logits() const { return cache_.logits.data(); }
  int64_t position() const { return cache_.pos; }
  int64_t capacity() const { return m_.config().seq_len; }
  const ModelConfig& config() const { return m_.config(); }
  // Bytes of decoding state (KV caches + SConv taps), what docs/sampling.md reports.
  int64_t state_bytes() const { return cache_.state_bytes(); }

 private:
  Model<T>& m_;
  DecodeCache<T> cache_;
};

}  // namespace marin
