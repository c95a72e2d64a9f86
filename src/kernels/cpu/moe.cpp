// The router's selection and the dispatcher's permute / combine (see kernels/moe.hpp). Tokens are
// independent: every loop runs parallel over tokens with a static split, and a token's arithmetic
// is the same whatever the thread count.
#include "kernels/moe.hpp"

#include "kernels/cpu/simd.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace marin::kernels {

using cpu::sigmoid;

template <class T>
void router_topk(const RouterShape& r, const T* s_all, const T* b, int32_t* expert, T* alpha,
                 T* prob, T* weight, T* prob_sum) {
  const i64 E = r.E, K = r.K;
  const T cs = T(r.combine_sum);
  cpu::parallel_for(r.rows, r.rows > 1, [&](i64 t) {
    const T* s = s_all + t * E;
    // Top K+1 of s + b by partial selection; ties broken by the lower expert index.
    int32_t idx[1024];
    int32_t* order = idx;
    std::vector<int32_t> big;
    if (E > 1024) {
      big.resize(size_t(E));
      order = big.data();
    }
    std::iota(order, order + E, 0);
    auto better = [&](int32_t a, int32_t c) {
      const T va = s[a] + b[a], vc = s[c] + b[c];
      return va > vc || (va == vc && a < c);
    };
    std::partial_sort(order, order + K + 1, order + E, better);
    int32_t* ex = expert + t * K;
    T* p = prob + t * K;
    T sum = 0;
    for (i64 k = 0; k < K; ++k) {
      ex[k] = order[k];
      p[k] = sigmoid(s[order[k]]);
      sum += p[k];
    }
    alpha[t] = s[order[K]] + b[order[K]];
    sum += T(1e-9);
    prob_sum[t] = sum;
    T* w = weight + t * K;
    for (i64 k = 0; k < K; ++k) w[k] = p[k] * cs / sum;
  });
}

template <class T>
void router_topk_bwd(const RouterShape& r, const T* dweight, const T* weight, const T* prob,
                     const T* prob_sum, const int32_t* expert, T* ds) {
  const i64 E = r.E, K = r.K;
  const T cs = T(r.combine_sum);
  cpu::parallel_for(r.rows, r.rows > 1, [&](i64 t) {
    const T* dw = dweight + t * K;
    const T* w = weight + t * K;
    const T* p = prob + t * K;
    const int32_t* ex = expert + t * K;
    // w_k = cs·p_k / S  ⇒  dp_j = (cs/S)·(dw_j − Σ_k dw_k w_k / cs)
    T dot = 0;
    for (i64 k = 0; k < K; ++k) dot += dw[k] * w[k];
    const T scale = cs / prob_sum[t];
    for (i64 k = 0; k < K; ++k) {
      const T dp = scale * (dw[k] - dot / cs);
      ds[t * E + ex[k]] += dp * p[k] * (T(1) - p[k]);
    }
  });
}

template <class T>
void moe_permute(const T* z, const int32_t* row_token, T* xg, i64 kept, i64 l) {
  embedding_fwd(z, row_token, xg, kept, l);  // a row gather, like the embedding lookup
}

template <class T>
void moe_combine(const T* grouped, const T* w, const int64_t* slot_row, T* out, i64 tokens, i64 K,
                 i64 l) {
  cpu::parallel_for(tokens, tokens > 1, [&](i64 t) {
    T* ot = out + t * l;
    std::fill(ot, ot + l, T(0));
    for (i64 k = 0; k < K; ++k) {
      const i64 row = slot_row[t * K + k];
      if (row < 0) continue;  // dropped by the transport
      const T wk = w ? w[t * K + k] : T(1);
      const T* y = grouped + row * l;
      for (i64 i = 0; i < l; ++i) ot[i] += wk * y[i];
    }
  });
}

template <class T>
void moe_combine_bwd(const T* dR, const T* grouped, const T* w, const int64_t* slot_row,
                     T* dgrouped, T* dw, i64 tokens, i64 K, i64 l) {
  cpu::parallel_for(tokens, tokens > 1, [&](i64 t) {
    const T* g = dR + t * l;
    for (i64 k = 0; k < K; ++k) {
      const i64 row = slot_row[t * K + k];
      if (row < 0) {
        dw[t * K + k] = 0;
        continue;
      }
      const T* y = grouped + row * l;
      T* dy = dgrouped + row * l;
      const T wk = w[t * K + k];
      T dot = 0;
      for (i64 i = 0; i < l; ++i) {
        dy[i] = wk * g[i];
        dot += g[i] * y[i];
      }
      dw[t * K + k] = dot;
    }
  });
}

#define MARIN_MOE_KERNELS(T)                                                                       \
  template void router_topk<T>(const RouterShape&, const T*, const T*, int32_t*, T*, T*, T*, T*);  \
  template void router_topk_bwd<T>(const RouterShape&, const T*, const T*, const T*, const T*,     \
                                   const int32_t*, T*);                                            \
  template void moe_permute<T>(const T*, const int32_t*, T*, i64, i64);                            \
  template void moe_combine<T>(const T*, const T*, const int64_t*, T*, i64, i64, i64);             \
  template void moe_combine_bwd<T>(const T*, const T*, const T*, const int64_t*, T*, T*, i64, i64, \
                                   i64);
MARIN_MOE_KERNELS(float)
MARIN_MOE_KERNELS(double)
#undef MARIN_MOE_KERNELS

}  // namespace marin::kernels
