#include "model/gated_norm.hpp"

namespace marin {

template <class T>
GatedRMSNorm<T>::GatedRMSNorm(const Binder<T>& bind, const std::string& norm,
                              const std::string& gnorm, i64 dim, i64 rank, i64 max_rows)
    : gain_(bind(norm + ".weight")),
      down_(bind(gnorm + ".down")),
      up_(bind(gnorm + ".up")),
      dim_(dim),
      rank_(rank),
      rstd_(max_rows),
      r_(max_rows * dim),
      u_(max_rows * rank),
      su_(max_rows * rank),
      gate_(max_rows * dim) {}

template <class T>
void GatedRMSNorm<T>::forward(const T* x, T* out, i64 rows) {
  x_ = x;
  kernels::rmsnorm_fwd(x, gain_.w, r_.data(), rstd_.data(), rows, dim_, 1e-5);
  linear_fwd(r_.data(), down_.w, u_.data(), rows, dim_, rank_);
  const i64 nu = rows * rank_;
  const T* u = u_.data();
  T* su = su_.data();
#pragma omp parallel for schedule(static) if (nu > 65536)
  for (i64 i = 0; i < nu; ++i) su[i] = u[i] * sigmoid(u[i]);
  linear_fwd(su_.data(), up_.w, gate_.data(), rows, rank_, dim_);
  const i64 n = rows * dim_;
  T* g = gate_.data();
  const T* r = r_.data();
#pragma omp parallel for schedule(static) if (n > 65536)
  for (i64 i = 0; i < n; ++i) {
    g[i] = sigmoid(g[i]);
    out[i] = r[i] * g[i];
  }
}

template <class T>
void GatedRMSNorm<T>::backward(const T* dout, T* dx, i64 rows, Arena<T>& arena) {
  ArenaScope<T> scope(arena);
  const i64 n = rows * dim_, nu = rows * rank_;
  T* dr = arena.take(n);
  T* dgp = arena.take(n);
  T* dsu = arena.take(nu);
  const T *g = gate_.data(), *r = r_.data();
#pragma omp parallel for schedule(static) if (n > 65536)
  for (i64 i = 0; i < n; ++i) {
    dr[i] = dout[i] * g[i];
    dgp[i] = dout[i] * r[i] * g[i] * (T(1) - g[i]);
  }
  linear_bwd(dgp, su_.data(), up_.w, dsu, up_.g, rows, rank_, dim_);
  const T* u = u_.data();
#pragma omp parallel for schedule(static) if (nu > 65536)
  for (i64 i = 0; i < nu; ++i) {
    const T s = sigmoid(u[i]);
    dsu[i] *= s * (T(1) + u[i] * (T(1) - s));  // silu'(u)
  }
  linear_bwd(dsu, r, down_.w, dr, down_.g, rows, dim_, rank_, /*accumulate_dx=*/true);
  kernels::rmsnorm_bwd(dr, x_, gain_.w, rstd_.data(), dx, gain_.g, rows, dim_);
}

template class GatedRMSNorm<float>;
template class GatedRMSNorm<double>;

}  // namespace marin
