// QB balancing's margin range, histograms, thresholds and bias, and the router's health sums
// (see kernels/moe.hpp). Single-threaded except the histograms, which split over experts (each
// expert writes only its own counts), so every result is independent of the thread count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/simd.hpp"
#include "kernels/moe.hpp"

namespace marin::kernels {

template <class T>
void qb_margin_range(const T* s_all, const T* alpha, i64 rows, i64 E, double* lo_out,
                     double* hi_out) {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  for (i64 t = 0; t < rows; ++t) {
    const T* s = s_all + t * E;
    const double a = double(alpha[t]);
    for (i64 e = 0; e < E; ++e) {
      const double mu = double(s[e]) - a;
      lo = std::min(lo, mu);
      hi = std::max(hi, mu);
    }
  }
  *lo_out = lo;
  *hi_out = hi;
}

template <class T>
void qb_histogram(const T* logits, const T* alpha, i64 rows, i64 E, double lo, double scale,
                  i64 bins, int64_t* counts) {
#pragma omp parallel for schedule(static)
  for (i64 e = 0; e < E; ++e) {
    int64_t* c = counts + e * bins;
    for (i64 t = 0; t < rows; ++t) {
      const double mu = double(logits[t * E + e]) - double(alpha[t]);
      // Clipped into the edge bins; a NaN margin (a non-finite step, which the trainer skips
      // anyway) lands in bin 0 instead of being undefined behaviour.
      const double f = std::floor((mu - lo) * scale);
      const i64 b = f >= double(bins) ? bins - 1 : (f >= 0 ? i64(f) : 0);
      ++c[b];
    }
  }
}

void qb_thresholds(const int64_t* counts, i64 E, i64 bins, double lo, double w, double n_star,
                   double* beta) {
  for (i64 e = 0; e < E; ++e) {
    const int64_t* c = counts + e * bins;
    int64_t C = 0;
    double be = lo;  // no bin reaches n*: threshold at the bottom of the range
    for (i64 b = bins - 1; b >= 0; --b) {
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
void qb_center(const double* beta, i64 E, T* bias) {
  double mean = 0;
  for (i64 e = 0; e < E; ++e) mean += beta[e];
  mean /= double(E);
  for (i64 e = 0; e < E; ++e) bias[e] = T(-beta[e] + mean);
}

template <class T>
void router_softmax_sums(const T* s_all, i64 rows, i64 E, double* entropy, double* lse2_out,
                         double* psum) {
  double ent = 0, lse2 = 0;
  // This batch's probability sums start from zero and join the running ones at the end.
  double* p = cpu::scratch<double>(0, size_t(E));
  std::fill(p, p + E, 0.0);
  for (i64 t = 0; t < rows; ++t) {
    const T* s = s_all + t * E;
    double m = -std::numeric_limits<double>::infinity();
    for (i64 e = 0; e < E; ++e) m = std::max(m, double(s[e]));
    double Z = 0, ws = 0;
    for (i64 e = 0; e < E; ++e) {
      const double x = std::exp(double(s[e]) - m);
      Z += x;
      ws += x * double(s[e]);
    }
    const double lse = m + std::log(Z);
    ent += lse - ws / Z;  // H(p) = lse − Σ p_e s_e
    lse2 += lse * lse;
    for (i64 e = 0; e < E; ++e) p[e] += std::exp(double(s[e]) - lse);
  }
  for (i64 e = 0; e < E; ++e) psum[e] += p[e];
  *entropy = ent;
  *lse2_out = lse2;
}

void count_loads(const int32_t* expert, i64 n, double* load) {
  for (i64 i = 0; i < n; ++i) load[expert[i]] += 1;
}

LoadStats load_stats(const double* load, const double* psum, i64 E, double assignments,
                     double tokens) {
  LoadStats st;
  st.min = std::numeric_limits<double>::infinity();
  for (i64 e = 0; e < E; ++e) {
    const double f = load[e] / assignments;
    st.balance += f * (psum[e] / tokens);
    if (f > 0) st.entropy -= f * std::log(f);
    st.max = std::max(st.max, load[e]);
    st.min = std::min(st.min, load[e]);
  }
  return st;
}

#define MARIN_ROUTER_HEALTH(T)                                                                \
  template void qb_margin_range<T>(const T*, const T*, i64, i64, double*, double*);           \
  template void qb_histogram<T>(const T*, const T*, i64, i64, double, double, i64, int64_t*); \
  template void qb_center<T>(const double*, i64, T*);                                         \
  template void router_softmax_sums<T>(const T*, i64, i64, double*, double*, double*);
MARIN_ROUTER_HEALTH(float)
MARIN_ROUTER_HEALTH(double)
#undef MARIN_ROUTER_HEALTH

}  // namespace marin::kernels
