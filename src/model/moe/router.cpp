#include "model/moe/router.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <numeric>

namespace marin {

template <class T>
Router<T>::Router(const Binder<T>& bind, const ModelConfig& c, int64_t layer, i64 max_rows)
    : w_(bind(fmt::format("layers.{}.moe.router", layer))),
      bias_(bind(fmt::format("layers.{}.moe.router_bias", layer))),
      d_(c.hidden_dim),
      combine_sum_(c.combine_sum) {
  r_.E = c.num_experts;
  r_.K = c.top_k;
  r_.logits.resize(max_rows * r_.E);
  r_.expert.resize(max_rows * r_.K);
  r_.alpha.resize(max_rows);
  r_.prob.resize(max_rows * r_.K);
  r_.weight.resize(max_rows * r_.K);
  r_.prob_sum.resize(max_rows);
}

template <class T>
void Router<T>::forward(const T* x, i64 rows) {
  const i64 E = r_.E, K = r_.K;
  r_.rows = rows;
  linear_fwd(x, w_.w, r_.logits.data(), rows, d_, E);
  const T* b = bias_.w;
#pragma omp parallel for schedule(static)
  for (i64 t = 0; t < rows; ++t) {
    const T* s = r_.logits.data() + t * E;
    // Top K+1 of s + b by partial selection; ties broken by the lower expert index.
    int32_t idx[1024];
    int32_t* order = idx;
    std::vector<int32_t> big;
    if (E > 1024) {
      big.resize(E);
      order = big.data();
    }
    std::iota(order, order + E, 0);
    auto better = [&](int32_t a, int32_t c) {
      const T va = s[a] + b[a], vc = s[c] + b[c];
      return va > vc || (va == vc && a < c);
    };
    std::partial_sort(order, order + K + 1, order + E, better);
    int32_t* ex = r_.expert.data() + t * K;
    T* p = r_.prob.data() + t * K;
    T sum = 0;
    for (i64 k = 0; k < K; ++k) {
      ex[k] = order[k];
      p[k] = sigmoid(s[order[k]]);
      sum += p[k];
    }
    r_.alpha[t] = s[order[K]] + b[order[K]];
    sum += T(1e-9);
    r_.prob_sum[t] = sum;
    T* w = r_.weight.data() + t * K;
    for (i64 k = 0; k < K; ++k) w[k] = p[k] * T(combine_sum_) / sum;
  }
}

template <class T>
void Router<T>::backward(const T* dweight, const T* x, T* dx, Arena<T>& arena) {
  ArenaScope<T> scope(arena);
  const i64 rows = r_.rows, E = r_.E, K = r_.K;
  T* ds = arena.take_zeroed(rows * E);
  const T cs = T(combine_sum_);
#pragma omp parallel for schedule(static)
  for (i64 t = 0; t < rows; ++t) {
    const T* dw = dweight + t * K;
    const T* w = r_.weight.data() + t * K;
    const T* p = r_.prob.data() + t * K;
    const int32_t* ex = r_.expert.data() + t * K;
    // w_k = cs·p_k / S  ⇒  dp_j = (cs/S)·(dw_j − Σ_k dw_k w_k / cs)
    T dot = 0;
    for (i64 k = 0; k < K; ++k) dot += dw[k] * w[k];
    const T scale = cs / r_.prob_sum[t];
    for (i64 k = 0; k < K; ++k) {
      const T dp = scale * (dw[k] - dot / cs);
      ds[t * E + ex[k]] += dp * p[k] * (T(1) - p[k]);
    }
  }
  linear_bwd(ds, x, w_.w, dx, w_.g, rows, d_, E, /*accumulate_dx=*/true);
}

template class Router<float>;
template class Router<double>;

}  // namespace marin
