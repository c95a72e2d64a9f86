// The local token dispatcher: gather, weighted combine, and their duals. See token_dispatcher.hpp.
#include "model/moe/token_dispatcher.hpp"

#include <algorithm>

namespace marin {

template <class T>
LocalDispatcher<T>::LocalDispatcher(const ModelConfig& c, i64 max_rows)
    : l_(c.latent_dim), K_(c.top_k) {
  plan_.reserve(max_rows, c.num_experts, c.top_k);
  xg_.resize(size_t(max_rows * c.top_k * l_));
  yg_.resize(size_t(max_rows * c.top_k * l_));
}

template <class T>
ExpertRows<T> LocalDispatcher<T>::dispatch(const Routing<T>& r, const T* z, i64 rows,
                                           const Dispatch& d, double capacity_factor) {
  rows_ = rows;
  plan_.build(r.expert.data(), rows, d, capacity_factor);
  const i64 kept = plan_.kept, l = l_;
  T* xg = xg_.data();
#pragma omp parallel for schedule(static)
  for (i64 row = 0; row < kept; ++row)
    std::copy(z + plan_.row_token[row] * l, z + (plan_.row_token[row] + 1) * l, xg + row * l);
  return {plan_.offsets.data(), kept, xg_.data(), yg_.data()};
}

template <class T>
void LocalDispatcher<T>::sum_slots(const T* grouped, const T* w, T* out) const {
  // out_t = Σ_k keep·w_k·grouped[row of (t, k)], token-parallel (no write races); w null: 1.
  const i64 l = l_, K = K_;
#pragma omp parallel for schedule(static)
  for (i64 t = 0; t < rows_; ++t) {
    T* ot = out + t * l;
    for (i64 i = 0; i < l; ++i) ot[i] = 0;
    for (i64 k = 0; k < K; ++k) {
      const i64 row = plan_.slot_row[t * K + k];
      if (row < 0) continue;  // dropped by the transport
      const T wk = w ? w[t * K + k] : T(1);
      const T* y = grouped + row * l;
      for (i64 i = 0; i < l; ++i) ot[i] += wk * y[i];
    }
  }
}

template <class T>
void LocalDispatcher<T>::combine(const Routing<T>& r, T* R) {
  sum_slots(yg_.data(), r.weight.data(), R);  // R_t = Σ_k keep·w_k·FFN_{e_k}(Z_t)
}

template <class T>
const T* LocalDispatcher<T>::combine_backward(const Routing<T>& r, const T* dR, T* dw,
                                              Arena<T>& arena) {
  const i64 l = l_, K = K_;
  T* dyg = arena.take(plan_.kept * l + 1);
  const T* w = r.weight.data();
#pragma omp parallel for schedule(static)
  for (i64 t = 0; t < rows_; ++t) {
    const T* g = dR + t * l;
    for (i64 k = 0; k < K; ++k) {
      const i64 row = plan_.slot_row[t * K + k];
      if (row < 0) {
        dw[t * K + k] = 0;
        continue;
      }
      const T* y = yg_.data() + row * l;
      T* dy = dyg + row * l;
      const T wk = w[t * K + k];
      T dot = 0;
      for (i64 i = 0; i < l; ++i) {
        dy[i] = wk * g[i];
        dot += g[i] * y[i];
      }
      dw[t * K + k] = dot;
    }
  }
  return dyg;
}

template <class T>
void LocalDispatcher<T>::dispatch_backward(const T* dxg, T* dz) {
  sum_slots(dxg, nullptr, dz);  // the dual of the gather: add each row back to its token
}

template class LocalDispatcher<float>;
template class LocalDispatcher<double>;

}  // namespace marin
