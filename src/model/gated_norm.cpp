#include "model/gated_norm.hpp"

#include "kernels/gates.hpp"

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
  kernels::silu_fwd(u_.data(), su_.data(), rows * rank_);
  linear_fwd(su_.data(), up_.w, gate_.data(), rows, rank_, dim_);
  kernels::sigmoid_gate_fwd(r_.data(), gate_.data(), out, rows * dim_);
}

template <class T>
void GatedRMSNorm<T>::backward(const T* dout, T* dx, i64 rows, Arena<T>& arena) {
  ArenaScope<T> scope(arena);
  const i64 n = rows * dim_, nu = rows * rank_;
  T* dr = arena.take(n);
  T* dgp = arena.take(n);
  T* dsu = arena.take(nu);
  kernels::sigmoid_gate_bwd(dout, r_.data(), gate_.data(), dr, dgp, n);
  linear_bwd(dgp, su_.data(), up_.w, dsu, up_.g, rows, rank_, dim_);
  kernels::silu_bwd(dsu, u_.data(), dsu, nu);
  linear_bwd(dsu, r_.data(), down_.w, dr, down_.g, rows, dim_, rank_, /*accumulate_dx=*/true);
  kernels::rmsnorm_bwd(dr, x_, gain_.w, rstd_.data(), dx, gain_.g, rows, dim_);
}

template class GatedRMSNorm<float>;
template class GatedRMSNorm<double>;

}  // namespace marin
