#include "model/moe/moe_layer.hpp"

#include <fmt/format.h>

namespace marin {

template <class T>
MoELayer<T>::MoELayer(const Binder<T>& bind, const ModelConfig& c, int64_t layer, i64 max_rows)
    : c_(c), router_(bind, c, layer, max_rows), experts_(bind, c, layer, max_rows) {
  const std::string p = fmt::format("layers.{}.moe.", layer);
  down_ = bind(p + "latent_down");
  norm_ = bind(p + "latent_norm");
  up_ = bind(p + "latent_up");
  const i64 l = c.latent_dim, A = max_rows * c.top_k;
  plan_.reserve(max_rows, c.num_experts, c.top_k);
  z0_.resize(max_rows * l);
  z_.resize(max_rows * l);
  rstd_.resize(max_rows);
  xg_.resize(A * l);
  yg_.resize(A * l);
  r_.resize(max_rows * l);
}

template <class T>
i64 MoELayer<T>::scratch(const ModelConfig& c, i64 rows) {
  const i64 l = c.latent_dim, A = rows * c.top_k;
  return 3 * rows * l + 2 * A * l + rows * c.top_k + 3 * A * c.expert_dim + rows * c.num_experts +
         512;
}

template <class T>
void MoELayer<T>::forward(const T* x, T* out, i64 rows, const Dispatch& dispatch) {
  x_ = x;
  rows_ = rows;
  const i64 d = c_.hidden_dim, l = c_.latent_dim, K = c_.top_k;
  router_.forward(x, rows);
  linear_fwd(x, down_.w, z0_.data(), rows, d, l);
  kernels::rmsnorm_fwd(z0_.data(), norm_.w, z_.data(), rstd_.data(), rows, l, 1e-5);

  plan_.build(router_.routing().expert.data(), rows, dispatch, c_.capacity_factor);
  const i64 kept = plan_.kept;
  const T* z = z_.data();
  T* xg = xg_.data();
#pragma omp parallel for schedule(static)
  for (i64 r = 0; r < kept; ++r)
    std::copy(z + plan_.row_token[r] * l, z + (plan_.row_token[r] + 1) * l, xg + r * l);
  experts_.forward(plan_, xg, yg_.data());

  // Combine: R_t = Σ_k keep·w_k·FFN_{e_k}(Z_t), token-parallel (no write races).
  const T* w = router_.routing().weight.data();
  T* R = r_.data();
#pragma omp parallel for schedule(static)
  for (i64 t = 0; t < rows; ++t) {
    T* Rt = R + t * l;
    for (i64 i = 0; i < l; ++i) Rt[i] = 0;
    for (i64 k = 0; k < K; ++k) {
      const i64 row = plan_.slot_row[t * K + k];
      if (row < 0) continue;  // dropped by a capacity-limited transport
      const T wk = w[t * K + k];
      const T* y = yg_.data() + row * l;
      for (i64 i = 0; i < l; ++i) Rt[i] += wk * y[i];
    }
  }
  linear_fwd(R, up_.w, out, rows, l, d);
}

template <class T>
void MoELayer<T>::backward(const T* dout, T* dx, Arena<T>& arena) {
  ArenaScope<T> scope(arena);
  const i64 rows = rows_, d = c_.hidden_dim, l = c_.latent_dim, K = c_.top_k;
  const i64 kept = plan_.kept;
  T* dR = arena.take(rows * l);
  T* dyg = arena.take(kept * l + 1);
  T* dxg = arena.take(kept * l + 1);
  T* dw = arena.take(rows * K);
  T* dz = arena.take(rows * l);
  T* dz0 = arena.take(rows * l);
  T* scratch = arena.take(3 * kept * c_.expert_dim + 1);

  linear_bwd(dout, r_.data(), up_.w, dR, up_.g, rows, l, d);
  const T* w = router_.routing().weight.data();
#pragma omp parallel for schedule(static)
  for (i64 t = 0; t < rows; ++t) {
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
  experts_.backward(plan_, dyg, dxg, scratch);
  // Scatter-add the dispatched rows back to their tokens (token-parallel via slot_row).
#pragma omp parallel for schedule(static)
  for (i64 t = 0; t < rows; ++t) {
    T* dzt = dz + t * l;
    for (i64 i = 0; i < l; ++i) dzt[i] = 0;
    for (i64 k = 0; k < K; ++k) {
      const i64 row = plan_.slot_row[t * K + k];
      if (row < 0) continue;
      const T* g = dxg + row * l;
      for (i64 i = 0; i < l; ++i) dzt[i] += g[i];
    }
  }
  kernels::rmsnorm_bwd(dz, z0_.data(), norm_.w, rstd_.data(), dz0, norm_.g, rows, l);
  linear_bwd(dz0, x_, down_.w, dx, down_.g, rows, d, l, /*accumulate_dx=*/true);
  router_.backward(dw, x_, dx, arena);
}

template class MoELayer<float>;
template class MoELayer<double>;

}  // namespace marin
