// QB router balancing (recipe §4); see qb_balance.hpp for the split into range / histogram /
// solve and how several ranks combine.
#include "model/moe/qb_balance.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "model/model.hpp"

namespace marin {

template <class T>
QBRange qb_range(const Routing<T>& r) {
  const int64_t rows = r.rows, E = r.E;
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
#pragma omp parallel for schedule(static) reduction(min : lo) reduction(max : hi)
  for (int64_t t = 0; t < rows; ++t) {
    const T* s = r.logits.data() + t * E;
    const double a = double(r.alpha[t]);
    for (int64_t e = 0; e < E; ++e) {
      const double mu = double(s[e]) - a;
      lo = std::min(lo, mu);
      hi = std::max(hi, mu);
    }
  }
  QBRange out;
  out.lo = lo;
  out.max = hi;
  return out;
}

template <class T>
void qb_histogram(const Routing<T>& r, const QBRange& range, int64_t bins, int64_t* counts) {
  MARIN_CHECK(bins >= 1, "qb_bins must be >= 1, got {}", bins);
  if (range.empty() || r.rows == 0) return;
  const int64_t rows = r.rows, E = r.E;
  const double lo = range.lo, scale = double(bins) / (range.hi() - lo);
  const T* logits = r.logits.data();
  const T* alpha = r.alpha.data();
  // One expert per iteration: each writes only its own row of counts.
#pragma omp parallel for schedule(static)
  for (int64_t e = 0; e < E; ++e) {
    int64_t* c = counts + e * bins;
    for (int64_t t = 0; t < rows; ++t) {
      const double mu = double(logits[t * E + e]) - double(alpha[t]);
      // Clipped into the edge bins; a NaN margin (a non-finite step, which the trainer skips
      // anyway) lands in bin 0 instead of being undefined behaviour.
      const double f = std::floor((mu - lo) * scale);
      const int64_t b = f >= double(bins) ? bins - 1 : (f >= 0 ? int64_t(f) : 0);
      ++c[b];
    }
  }
}

void qb_solve(const int64_t* counts, int64_t E, int64_t bins, const QBRange& range, double n_star,
              double* beta) {
  if (range.empty()) {
    std::fill(beta, beta + E, 0.0);
    return;
  }
  const double lo = range.lo, w = (range.hi() - lo) / double(bins);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t* c = counts + e * bins;
    int64_t C = 0;
    double be = lo;  // no bin reaches n*: threshold at the bottom of the range
    for (int64_t b = bins - 1; b >= 0; --b) {
      C += c[b];
      if (double(C) >= n_star) {
        be = lo + double(b) * w + w * (double(C) - n_star) / double(std::max<int64_t>(c[b], 1));
        break;
      }
    }
    beta[e] = be;
  }
}

template <class T>
void qb_bias_from_beta(const double* beta, int64_t E, T* bias) {
  double mean = 0;
  for (int64_t e = 0; e < E; ++e) mean += beta[e];
  mean /= double(E);
  for (int64_t e = 0; e < E; ++e) bias[e] = T(-beta[e] + mean);
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
