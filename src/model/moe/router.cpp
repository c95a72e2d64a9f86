#include "model/moe/router.hpp"

#include <fmt/format.h>

#include "kernels/moe.hpp"

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
kernels::RouterShape Router<T>::shape(i64 rows) const {
  return {rows, r_.E, r_.K, combine_sum_};
}

template <class T>
void Router<T>::forward(const T* x, i64 rows) {
  r_.rows = rows;
  // Router logits in fp32 whatever the compute dtype (recipe §2: selection and QB read them).
  linear_fwd(x, w_.w, r_.logits.data(), rows, d_, r_.E, false, kernels::Precision::fp32);
  kernels::router_topk(shape(rows), r_.logits.data(), bias_.w, r_.expert.data(), r_.alpha.data(),
                       r_.prob.data(), r_.weight.data(), r_.prob_sum.data());
}

template <class T>
void Router<T>::backward(const T* dweight, const T* x, T* dx, Arena<T>& arena) {
  ArenaScope<T> scope(arena);
  const i64 rows = r_.rows;
  T* ds = arena.take_zeroed(rows * r_.E);
  kernels::router_topk_bwd(shape(rows), dweight, r_.weight.data(), r_.prob.data(),
                           r_.prob_sum.data(), r_.expert.data(), ds);
  linear_bwd(ds, x, w_.w, dx, w_.g, rows, d_, r_.E, /*accumulate_dx=*/true,
             kernels::Precision::fp32);
}

template class Router<float>;
template class Router<double>;

}  // namespace marin
