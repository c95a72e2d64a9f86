#include "eval/sampler.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.hpp"
#include "core/utf8.hpp"

namespace marin {

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
  // seam: the sampler's own distribution over the kept ids (temperature), not the model's math
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
  // seam: inverting the sampler's CDF at one uniform draw
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

size_t utf8_complete_prefix(std::string_view s) {
  return utf8::complete_prefix(s);
}

// ---- the decoder ----

template <class T>
const T* Decoder<T>::prefill(const int32_t* tokens, int64_t n) {
  if (n <= 0) fail("prefill needs at least one token");
  for (int64_t i = 0; i < n; ++i) step(tokens[i]);
  return logits();
}

template class Decoder<float>;
template class Decoder<double>;

}  // namespace marin
