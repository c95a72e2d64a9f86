#pragma once
// Logged router health (recipe §2, not in the loss), per layer, from a layer's Routing and
// DispatchPlan after forward. Over the T tokens of the batch, with p_t = softmax(s_t) of the
// unbiased logits, f_e = assignments to e / (T·K) from the top-K selection (before any drops) and
// n* = T·K/E:
//   entropy       mean_t H(p_t) in nats (0 = confident router, ln E = uniform)
//   load_entropy  H(f) in nats, the entropy of the expert-load distribution (ln E = balanced)
//   balance       Switch-style E·Σ_e f_e·p̄_e, p̄_e = mean_t p_t,e (1 when both are uniform)
//   z             mean_t logsumexp(s_t)²
//   max_load, min_load  max_e / min_e (load_e / n*); load_ratio = max_load / min_load (+inf when
//                 an expert got nothing; to_json writes it as null)
//   drop_fraction dropped / (T·K) (0 for dropless transport); for the pooled transport also
//                 sender_drop_fraction and receiver_drop_fraction (their sum), and the per-wave
//                 capacities the transport used (sender_rows_per_wave: per destination shard;
//                 receiver_rows_per_wave: per local expert), which `marin plan` predicts
// The sums behind them are kept in RouterStatsAccumulator as one flat vector of doubles, so
// micro-batches add and ranks all-reduce (SUM) before finish().
#include <cstdint>
#include <nlohmann/json_fwd.hpp>

#include "core/buffer.hpp"
#include "model/moe/drop_rule.hpp"
#include "model/moe/router.hpp"

namespace marin {

struct RouterStats {
  int64_t tokens = 0;
  double entropy = 0;
  double load_entropy = 0;
  double balance = 0;
  double z = 0;
  double max_load = 0;
  double min_load = 0;
  double load_ratio = 0;
  double drop_fraction = 0;
  double sender_drop_fraction = 0, receiver_drop_fraction = 0;   // pooled: where drops happened
  int64_t sender_rows_per_wave = 0, receiver_rows_per_wave = 0;  // pooled: 0 otherwise
};

nlohmann::json to_json(const RouterStats& s);  // {"tokens", "entropy", ..., "drop_fraction"}

class RouterStatsAccumulator {
 public:
  RouterStatsAccumulator() = default;
  explicit RouterStatsAccumulator(int64_t E, int64_t K) { reset(E, K); }
  void reset(int64_t E, int64_t K);  // sizes once per E; clears the sums
  template <class T>
  void add(const Routing<T>& r, const DispatchPlan& plan);
  RouterStats finish() const;

  // Flat sums [tokens, dropped, Σ_t H(p_t), Σ_t lse², sender dropped, receiver dropped,
  // p_sum[E], load[E]] for an all-reduce SUM.
  double* sums() { return sums_.data(); }
  int64_t size() const { return int64_t(sums_.size()); }

 private:
  int64_t E_ = 0, K_ = 0;
  Buffer<double> sums_;
  // Pooled: the last plan's capacities (the same on every rank and micro-batch: not summed).
  PooledCapacity pooled_;
};

// One layer, one batch: reset + add + finish.
template <class T>
RouterStats router_stats(const Routing<T>& r, const DispatchPlan& plan);

}  // namespace marin
