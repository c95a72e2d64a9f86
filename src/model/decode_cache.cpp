#include "model/decode_cache.hpp"

#include <algorithm>

namespace marin {

template <class T>
DecodeCache<T>::DecodeCache(const ModelConfig& c) {
  c.validate();
  const int64_t d = c.hidden_dim, hd = c.head_dim, kd = c.kv_dim();
  const int64_t taps = std::max<int64_t>(c.sconv_kernel - 1, 0);
  layers.resize(size_t(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerCache<T>& L = layers[size_t(l)];
    const bool global = c.is_global(l);
    L.kv_used = global ? c.kv_heads_global : c.kv_heads_local;
    L.cap = global ? c.seq_len : std::min(c.sliding_window, c.seq_len);
    L.k.resize(size_t(L.cap * L.kv_used * hd));
    L.v.resize(size_t(L.cap * L.kv_used * hd));
    if (c.has_sconv("k")) L.tap_k.resize(size_t(taps * kd));
    if (c.has_sconv("attn")) L.tap_attn.resize(size_t(taps * d));
    if (c.has_sconv("mlp")) L.tap_mlp.resize(size_t(taps * d));
  }
  logits.resize(size_t(c.vocab_size));
}

template <class T>
void DecodeCache<T>::reset() {
  pos = 0;
  for (LayerCache<T>& L : layers)
    for (auto* b : {&L.k, &L.v, &L.tap_k, &L.tap_attn, &L.tap_mlp}) b->zero();
}

template <class T>
int64_t DecodeCache<T>::state_bytes() const {
  int64_t n = 0;
  // seam: adds up buffer sizes (integers)
  for (const LayerCache<T>& L : layers)
    n += int64_t(L.k.size() + L.v.size() + L.tap_k.size() + L.tap_attn.size() + L.tap_mlp.size());
  return n * int64_t(sizeof(T));
}

template struct DecodeCache<float>;
template struct DecodeCache<double>;

}  // namespace marin
