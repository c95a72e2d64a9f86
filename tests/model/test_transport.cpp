// The expert transports' drop rules against brute-force simulations written straight from their
// definitions (docs/distributed.md): recipe §8's capacity over a step, and the 535B run's pooled
// waves.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "model/moe/drop_rule.hpp"
#include "model/moe/router_stats.hpp"

using namespace marin;

namespace {

// A skewed routing of `tokens` tokens to K = 2 of E experts: expert 0 is asked for far more than
// its share, the last expert never.
std::vector<int32_t> skewed_routing(int64_t tokens, int64_t E, uint64_t seed) {
  std::vector<int32_t> ex;
  uint64_t x = seed;
  for (int64_t t = 0; t < tokens; ++t) {
    int32_t prev = -1;
    for (int k = 0; k < 2; ++k) {
      int32_t e;
      do {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t u = (x >> 33) % 100;
        e = u < 45 ? 0 : int32_t(1 + u % uint64_t(E - 2));
      } while (e == prev);
      ex.push_back(prev = e);
    }
  }
  return ex;
}

// The pooled rule for one sender holding all E experts (S = 1 shard), from its definition: the
// i-th assignment (token-major, then slot) goes in wave i mod W and slot i div W, kept by the
// sender iff slot < ceil(cf·A/W); the receiver ranks each expert's rows within a wave in arrival
// order and keeps the first ceil(cf·A/(E·W)).
std::vector<bool> pooled_brute_force(const std::vector<int32_t>& ex, int64_t E, int64_t W,
                                     double cf, int64_t& sender_drops, int64_t& receiver_drops) {
  const int64_t A = int64_t(ex.size());
  const auto sender_cap = int64_t(std::ceil(cf * double(A) / double(W)));
  const auto receiver_cap = int64_t(std::ceil(cf * double(A) / double(E * W)));
  std::vector<bool> keep(size_t(A), false);
  sender_drops = receiver_drops = 0;
  for (int64_t w = 0; w < W; ++w) {
    // The wave's payload in the order the sender packs it (its slots), i.e. increasing i.
    std::map<int32_t, int64_t> seen;  // expert → rows of this wave so far
    for (int64_t i = w; i < A; i += W) {
      if (i / W >= sender_cap) {
        ++sender_drops;
        continue;
      }
      if (seen[ex[size_t(i)]]++ < receiver_cap)
        keep[size_t(i)] = true;
      else
        ++receiver_drops;
    }
  }
  return keep;
}

}  // namespace

TEST(Pooled, DropsEqualABruteForceSimulationOfTheRule) {
  const int64_t E = 8, K = 2;
  for (int64_t W : {1, 2, 3, 5}) {
    for (double cf : {0.5, 1.0, 1.15}) {
      for (int64_t tokens : {1, 7, 64, 301}) {
        const auto ex = skewed_routing(tokens, E, uint64_t(W * 1000 + tokens));
        DispatchPlan plan;
        plan.reserve(tokens, E, K);
        plan.build(ex.data(), tokens, Dispatch{Transport::Pooled, W}, cf);
        int64_t sd = 0, rd = 0;
        const auto keep = pooled_brute_force(ex, E, W, cf, sd, rd);
        int64_t kept = 0;
        for (int64_t a = 0; a < tokens * K; ++a) {
          ASSERT_EQ(plan.slot_row[a] >= 0, keep[size_t(a)])
              << "W " << W << " cf " << cf << " tokens " << tokens << " assignment " << a;
          kept += keep[size_t(a)];
        }
        EXPECT_EQ(plan.kept, kept);
        EXPECT_EQ(plan.sender_dropped, sd);
        EXPECT_EQ(plan.receiver_dropped, rd);
        EXPECT_EQ(plan.dropped, sd + rd);
        // Kept rows are grouped by expert, each group in arrival order.
        for (int64_t e = 0; e < E; ++e)
          for (int64_t r = plan.offsets[e]; r + 1 < plan.offsets[e + 1]; ++r) {
            EXPECT_EQ(ex[size_t(plan.row_token[r] * K + plan.row_slot[r])], e);
            EXPECT_LT(plan.row_token[r] * K + plan.row_slot[r],
                      plan.row_token[r + 1] * K + plan.row_slot[r + 1]);
          }
      }
    }
  }
  // With a skewed router the receiver does drop, and one sender never drops (S = 1).
  const auto ex = skewed_routing(300, E, 5);
  DispatchPlan plan;
  plan.reserve(300, E, K);
  plan.build(ex.data(), 300, Dispatch{Transport::Pooled, 3}, 1.15);
  EXPECT_GT(plan.receiver_dropped, 0);
  EXPECT_EQ(plan.sender_dropped, 0);
  // The capacities it used are marin plan's (pooled_capacity), and the router's metrics line
  // reports them: A = 600 assignments, one shard, 8 local experts, 3 waves.
  EXPECT_EQ(plan.pooled.sender_rows, 230);   // ceil(1.15 · 600 / (1 · 3))
  EXPECT_EQ(plan.pooled.receiver_rows, 29);  // ceil(1.15 · 600 / (8 · 3))
  Routing<float> routing;
  routing.rows = 300, routing.E = E, routing.K = K;
  routing.logits.resize(size_t(300 * E));
  routing.expert.resize(ex.size());
  std::copy(ex.begin(), ex.end(), routing.expert.data());
  const nlohmann::json j = to_json(router_stats(routing, plan));
  EXPECT_EQ(j["sender_rows_per_wave"], 230);
  EXPECT_EQ(j["receiver_rows_per_wave"], 29);
  DispatchPlan dropless;
  dropless.reserve(300, E, K);
  dropless.build(ex.data(), 300, Dispatch{Transport::Dropless}, 1.15);
  EXPECT_FALSE(to_json(router_stats(routing, dropless)).contains("sender_rows_per_wave"));
}

TEST(Capacity, AStepOfMicroBatchesDropsWhatOneForwardDrops) {
  const int64_t E = 8, K = 2, tokens = 240, micro = 40;
  const auto ex = skewed_routing(tokens, E, 11);
  DispatchPlan whole, part;
  whole.reserve(tokens, E, K);
  whole.build(ex.data(), tokens, Transport::Capacity, 1.0);
  ASSERT_GT(whole.dropped, 0);
  // The brute force: expert e keeps its first ceil(cf·T·K/E) assignments in arrival order.
  const auto cap = int64_t(std::ceil(1.0 * double(tokens * K) / double(E)));
  std::vector<int64_t> seen(size_t(E), 0);
  for (int64_t a = 0; a < tokens * K; ++a)
    EXPECT_EQ(whole.slot_row[a] >= 0, seen[size_t(ex[size_t(a)])]++ < cap) << a;
  part.reserve(micro, E, K);
  part.begin_step(tokens);
  int64_t dropped = 0;
  for (int64_t m = 0; m < tokens / micro; ++m) {
    part.build(ex.data() + m * micro * K, micro, Transport::Capacity, 1.0);
    dropped += part.dropped;
    for (int64_t a = 0; a < micro * K; ++a)
      EXPECT_EQ(part.slot_row[a] >= 0, whole.slot_row[m * micro * K + a] >= 0);
  }
  EXPECT_EQ(dropped, whole.dropped);
}
