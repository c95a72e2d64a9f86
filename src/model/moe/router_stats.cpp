// Router health metrics (recipe §2 "Logged router health"); definitions in router_stats.hpp.
#include "model/moe/router_stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "kernels/moe.hpp"

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
  nlohmann::json j = {{"tokens", s.tokens},
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
  if (s.sender_rows_per_wave > 0) {
    j["sender_rows_per_wave"] = s.sender_rows_per_wave;
    j["receiver_rows_per_wave"] = s.receiver_rows_per_wave;
  }
  return j;
}

void RouterStatsAccumulator::reset(int64_t E, int64_t K) {
  E_ = E;
  K_ = K;
  const size_t n = size_t(kHeader + 2 * E);
  if (sums_.size() != n)
    sums_.resize(n);
  else
    sums_.zero();
  pooled_ = {};
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
  kernels::router_softmax_sums(r.logits.data(), rows, E, &ent, &lse2, psum);
  // Loads from the selection itself (the plan's `requested` counts the same thing).
  kernels::count_loads(r.expert.data(), rows * K_, load);
  sums_[kTokens] += double(rows);
  sums_[kDropped] += double(plan.dropped);
  sums_[kSenderDropped] += double(plan.sender_dropped);
  sums_[kReceiverDropped] += double(plan.receiver_dropped);
  pooled_ = plan.pooled;
  sums_[kEntropy] += ent;
  sums_[kLse2] += lse2;
}

RouterStats RouterStatsAccumulator::finish() const {
  RouterStats st;
  const double T = sums_.size() ? sums_[kTokens] : 0;
  st.tokens = int64_t(T);
  st.sender_rows_per_wave = pooled_.sender_rows;
  st.receiver_rows_per_wave = pooled_.receiver_rows;
  if (T <= 0 || E_ == 0) return st;
  const double* psum = sums_.data() + kHeader;
  const double* load = psum + E_;
  const double assignments = T * double(K_), n_star = assignments / double(E_);
  st.entropy = sums_[kEntropy] / T;
  st.z = sums_[kLse2] / T;
  st.drop_fraction = sums_[kDropped] / assignments;
  st.sender_drop_fraction = sums_[kSenderDropped] / assignments;
  st.receiver_drop_fraction = sums_[kReceiverDropped] / assignments;
  const kernels::LoadStats ls = kernels::load_stats(load, psum, E_, assignments, T);
  st.balance = double(E_) * ls.balance;
  st.load_entropy = ls.entropy;
  st.max_load = ls.max / n_star;
  st.min_load = ls.min / n_star;
  st.load_ratio = ls.min > 0 ? ls.max / ls.min : std::numeric_limits<double>::infinity();
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
