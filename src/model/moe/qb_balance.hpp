#pragma once
// QB router balancing (recipe §4: quantile balancing, next-step bias). After a step's forward, per
// layer and over every token of the global batch: margins μ_{t,e} = s_{t,e} − α_t (unbiased logit
// minus the token's (K+1)-th biased value), target load n* = T·K/E; a histogram of each expert's
// margins on qb_bins equal bins over [lo, hi] gives the margin β_e above which n* tokens lie
// (linear interpolation inside the bin), and the next step's bias is b_e = −β_e + mean_e(β).
//
// The estimate is split so that several ranks (or micro-batches) combine exactly:
//   1. qb_range(routing)             → local {min μ, max μ};  all-reduce MIN / MAX (QBRange::merge)
//   2. qb_histogram(routing, range)  → adds local counts [E×bins]; all-reduce SUM
//   3. qb_solve(counts, range, n*)   → β[E]  (identical on every rank)
//   4. qb_bias_from_beta(β)          → b = −β + mean(β)
// The effective upper edge hi = max(max μ, lo + 1e-6) is taken after the reduction (QBRange::hi()).
// QBBalancer does all four for every layer of a Model in place; a QBReducer plugs in the
// communicator (null = one rank). The bias lives in the parameter buffer
// (layers.i.moe.router_bias), so checkpoints carry it; the model zeroes its gradient.
#include <cstdint>
#include <limits>
#include <vector>

#include "core/buffer.hpp"
#include "model/moe/router.hpp"

namespace marin {

template <class T>
class Model;

struct QBRange {
  double lo = std::numeric_limits<double>::infinity();    // min μ
  double max = -std::numeric_limits<double>::infinity();  // max μ (before the 1e-6 floor)
  bool empty() const { return !(lo <= max); }
  void merge(const QBRange& o) {
    if (o.lo < lo) lo = o.lo;
    if (o.max > max) max = o.max;
  }
  // Upper edge of the binned interval: max(max μ, lo + 1e-6).
  double hi() const { return max > lo + 1e-6 ? max : lo + 1e-6; }
};

// Min and max margin over this routing's rows and all E experts (local; merge across ranks).
template <class T>
QBRange qb_range(const Routing<T>& r);

// Adds the margins of every (token, expert) of `r` into counts[e·bins + b] (not cleared first),
// with b = floor((μ − lo)/w), w = (hi − lo)/bins, clipped into [0, bins − 1].
template <class T>
void qb_histogram(const Routing<T>& r, const QBRange& range, int64_t bins, int64_t* counts);

// β[e] from the summed histograms. For each expert, b* is the highest bin with
// C_e(b*) = Σ_{b ≥ b*} count_e(b) ≥ n*, and β_e = lo + b*·w + w·(C_e(b*) − n*) / max(count_e(b*),
// 1). When no bin qualifies (the expert has fewer than n* margins in all, impossible when every
// token has a margin for every expert and n* ≤ T), β_e = lo: its threshold sits at the bottom of
// the range, so it is pushed as far towards selection as the data can say. An empty range gives β =
// 0.
void qb_solve(const int64_t* counts, int64_t E, int64_t bins, const QBRange& range, double n_star,
              double* beta);

// b_e = −β_e + mean_e(β), written as T.
template <class T>
void qb_bias_from_beta(const double* beta, int64_t E, T* bias);

// The cross-rank reductions QB needs (an MPI implementation does MIN/MAX then SUM all-reduces).
struct QBReducer {
  virtual ~QBReducer() = default;
  virtual void reduce_range(QBRange& range) = 0;               // global min lo, max max
  virtual void reduce_counts(int64_t* counts, int64_t n) = 0;  // element-wise global sum
  virtual int64_t reduce_tokens(int64_t local_tokens) = 0;     // global T
};

// Updates every layer's router bias of a model in place from its last forward (call it after the
// step's forward, before the next step's forward). Workspace is sized on first use and reused.
class QBBalancer {
 public:
  explicit QBBalancer(int64_t bins = 10000, QBReducer* reducer = nullptr)
      : bins_(bins), reducer_(reducer) {}
  template <class T>
  void update(Model<T>& m);
  // Single-layer form: reads `r`, writes `bias` [E].
  template <class T>
  void update_layer(const Routing<T>& r, T* bias);

  int64_t bins() const { return bins_; }
  // β and n* of the last layer updated (for tests and logging).
  const Buffer<double>& last_beta() const { return beta_; }
  double last_n_star() const { return n_star_; }

 private:
  int64_t bins_;
  QBReducer* reducer_;
  Buffer<int64_t> counts_;
  Buffer<double> beta_;
  double n_star_ = 0;
};

}  // namespace marin
