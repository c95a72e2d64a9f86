// QB router balancing (recipe §4); see qb_balance.hpp for the split into range / histogram /
// solve and how several ranks combine.
#include "model/moe/qb_balance.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "kernels/moe.hpp"
#include "model/model.hpp"

namespace marin {

template <class T>
QBRange qb_range(const Routing<T>& r) {
  QBRange out;
  kernels::qb_margin_range(r.logits.data(), r.alpha.data(), r.rows, r.E, &out.lo, &out.max);
  return out;
}

template <class T>
void qb_histogram(const Routing<T>& r, const QBRange& range, int64_t bins, int64_t* counts) {
  MARIN_CHECK(bins >= 1, "qb_bins must be >= 1, got {}", bins);
  if (range.empty() || r.rows == 0) return;
  const double scale = double(bins) / (range.hi() - range.lo);
  kernels::qb_histogram(r.logits.data(), r.alpha.data(), r.rows, r.E, range.lo, scale, bins,
                        counts);
}

void qb_solve(const int64_t* counts, int64_t E, int64_t bins, const QBRange& range, double n_star,
              double* beta) {
  if (range.empty()) {
    std::fill(beta, beta + E, 0.0);
    return;
  }
  kernels::qb_thresholds(counts, E, bins, range.lo, (range.hi() - range.lo) / double(bins), n_star,
                         beta);
}

template <class T>
void qb_bias_from_beta(const double* beta, int64_t E, T* bias) {
  kernels::qb_center(beta, E, bias);
}

template <class T>
void QBBalancer::update_layer(const Routing<T>& r, T* bias) {
  const int64_t E = r.E;
  if (counts_.size() != size_t(E * bins_))
    counts_.resize(size_t(E * bins_));
  else
    counts_.zero();
  if (beta_.size() != size_t(E)) beta_.resize(size_t(E));

  QBRange range = qb_range(r);
  int64_t T_total = r.rows;
  if (reducer_) {
    reducer_->reduce_range(range);
    T_total = reducer_->reduce_tokens(T_total);
  }
  qb_histogram(r, range, bins_, counts_.data());
  if (reducer_) reducer_->reduce_counts(counts_.data(), E * bins_);
  n_star_ = double(T_total) * double(r.K) / double(E);
  if (T_total == 0) return;  // nothing routed anywhere: keep the bias
  qb_solve(counts_.data(), E, bins_, range, n_star_, beta_.data());
  qb_bias_from_beta(beta_.data(), E, bias);
}

template <class T>
void QBBalancer::update(Model<T>& m) {
  for (int64_t l = 0; l < m.config().num_layers; ++l) {
    auto& router = m.block(l).moe().router();
    update_layer(router.routing(), router.bias());
  }
}

#define MARIN_QB_INSTANTIATE(T)                                                        \
  template QBRange qb_range<T>(const Routing<T>&);                                     \
  template void qb_histogram<T>(const Routing<T>&, const QBRange&, int64_t, int64_t*); \
  template void qb_bias_from_beta<T>(const double*, int64_t, T*);                      \
  template void QBBalancer::update_layer<T>(const Routing<T>&, T*);                    \
  template void QBBalancer::update<T>(Model<T>&);
MARIN_QB_INSTANTIATE(float)
MARIN_QB_INSTANTIATE(double)
#undef MARIN_QB_INSTANTIATE

}  // namespace marin
