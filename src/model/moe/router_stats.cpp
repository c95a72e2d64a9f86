// Router health metrics (recipe §2 "Logged router health"); definitions in router_stats.hpp.
#include "model/moe/router_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace marin {

namespace {
enum : int64_t {
  kTokens = 0,
  kDropped = 1,
  kEntropy = 2,
  kLse2 = 3,
  kSenderDropped = 4,
  kReceiverDropped = 5,
  kHeader = 6
};
}

nlohmann::json to_json(const RouterStats& s) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  return {{"tokens", s.tokens},
          {"entropy", num(s.entropy)},
          {"load_entropy", num(s.load_entropy)},
          {"balance", num(s.balance)},
          {"z", num(s.z)},
          {"max_load", num(s.max_load)},
          {"min_load", num(s.min_load)},
          {"load_ratio", num(s.load_ratio)},
          {"drop_fraction", num(s.drop_fraction)},
          {"sender_drop_fraction", num(s.sender_drop_fraction)},
          {"receiver_drop_fraction", num(s.receiver_drop_fraction)}};
}

void RouterStatsAccumulator::reset(int64_t E, int64_t K) {
  E_ = E;
  K_ = K;
  const size_t n = size_t(kHeader + 2 * E);
  if (sums_.size() != n)
    sums_.resize(n);
  else
    sums_.zero();
}

template <class T>
void RouterStatsAccumulator::add(const Routing<T>& r, const DispatchPlan& plan) {
  MARIN_CHECK(r.E == E_ && r.K == K_ && plan.E == E_,
              "router stats: accumulator is for E={} K={}, got routing E={} K={}, plan E={}", E_,
              K_, r.E, r.K, plan.E);
  const int64_t rows = r.rows, E = E_;
  double* psum = sums_.data() + kHeader;
  double* load = psum + E;
  double ent = 0, lse2 = 0;
#pragma omp parallel for schedule(static) reduction(+ : ent, lse2) reduction(+ : psum[:E])
  for (int64_t t = 0; t < rows; ++t) {
    const T* s = r.logits.data() + t * E;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t e = 0; e < E; ++e) m = std::max(m, double(s[e]));
    double Z = 0, ws = 0;
    for (int64_t e = 0; e < E; ++e) {
      const double x = std::exp(double(s[e]) - m);
      Z += x;
      ws += x * double(s[e]);
    }
    const double lse = m + std::log(Z);
    ent += lse - ws / Z;  // H(p) = lse − Σ p_e s_e
    lse2 += lse * lse;
    for (int64_t e = 0; e < E; ++e) psum[e] += std::exp(double(s[e]) - lse);
  }
  // Loads from the selection itself (the plan's `requested` counts the same thing).
  const int32_t* ex = r.expert.data();
  for (int64_t i = 0; i < rows * K_; ++i) load[ex[i]] += 1;
  sums_[kTokens] += double(rows);
  sums_[kDropped] += double(plan.dropped);
  sums_[kSenderDropped] += double(plan.sender_dropped);
  sums_[kReceiverDropped] += double(plan.receiver_dropped);
  sums_[kEntropy] += ent;
  sums_[kLse2] += lse2;
}

RouterStats RouterStatsAccumulator::finish() const {
  RouterStats st;
  const double T = sums_.size() ? sums_[kTokens] : 0;
  st.tokens = int64_t(T);
  if (T <= 0 || E_ == 0) return st;
  const double* psum = sums_.data() + kHeader;
  const double* load = psum + E_;
  const double assignments = T * double(K_), n_star = assignments / double(E_);
  st.entropy = sums_[kEntropy] / T;
  st.z = sums_[kLse2] / T;
  st.drop_fraction = sums_[kDropped] / assignments;
  st.sender_drop_fraction = sums_[kSenderDropped] / assignments;
  st.receiver_drop_fraction = sums_[kReceiverDropped] / assignments;
  double bal = 0, hf = 0, mx = 0, mn = std::numeric_limits<double>::infinity();
  for (int64_t e = 0; e < E_; ++e) {
    const double f = load[e] / assignments;
    bal += f * (psum[e] / T);
    if (f > 0) hf -= f * std::log(f);
    mx = std::max(mx, load[e]);
    mn = std::min(mn, load[e]);
  }
  st.balance = double(E_) * bal;
  st.load_entropy = hf;
  st.max_load = mx / n_star;
  st.min_load = mn / n_star;
  st.load_ratio = mn > 0 ? mx / mn : std::numeric_limits<double>::infinity();
  return st;
}

template <class T>
RouterStats router_stats(const Routing<T>& r, const DispatchPlan& plan) {
  RouterStatsAccumulator acc(r.E, r.K);
  acc.add(r, plan);
  return acc.finish();
}

template void RouterStatsAccumulator::add<float>(const Routing<float>&, const DispatchPlan&);
template void RouterStatsAccumulator::add<double>(const Routing<double>&, const DispatchPlan&);
template RouterStats router_stats<float>(const Routing<float>&, const DispatchPlan&);
template RouterStats router_stats<double>(const Routing<double>&, const DispatchPlan&);

}  // namespace marin
