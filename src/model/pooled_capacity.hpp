#pragma once
// The capacities of the 535B run's pooled-wave all-to-all (issue 11, research summary), in one
// place so the planner and a transport that implements the rule cannot disagree by a row.
//
// Per sender GPU there are A = T_local·K assignments, S expert shards and W waves. An assignment
// ranked r within its destination shard goes in wave r mod W, slot r div W, and is kept at the
// sender iff slot < ceil(cf·A/(S·W)); at the receiver each local expert keeps, per wave, the first
// ceil(cf·A/(E_loc·W)) rows in arrival order. Both are "cf times the balanced share".
#include <cmath>
#include <cstdint>

#include "core/error.hpp"

namespace marin {

// ceil(cf·assignments/slots): the rounding of the capacity transport (dispatcher.cpp) too.
inline int64_t capacity_rows(double capacity_factor, int64_t assignments, int64_t slots) {
  return static_cast<int64_t>(
      std::ceil(capacity_factor * static_cast<double>(assignments) / static_cast<double>(slots)));
}

struct PooledCapacity {
  int64_t assignments = 0;    // A = T_local·K
  int64_t sender_rows = 0;    // per destination shard per wave
  int64_t receiver_rows = 0;  // per local expert per wave
};

inline PooledCapacity pooled_capacity(int64_t tokens_local, int64_t top_k, int64_t shards,
                                      int64_t local_experts, int64_t waves,
                                      double capacity_factor) {
  MARIN_CHECK(tokens_local > 0 && top_k > 0 && shards > 0 && local_experts > 0 && waves > 0,
              "pooled capacity needs positive tokens ({}), top_k ({}), shards ({}), local experts "
              "({}) and waves ({})",
              tokens_local, top_k, shards, local_experts, waves);
  MARIN_CHECK(capacity_factor > 0, "capacity factor must be positive, got {}", capacity_factor);
  PooledCapacity p;
  p.assignments = tokens_local * top_k;
  p.sender_rows = capacity_rows(capacity_factor, p.assignments, shards * waves);
  p.receiver_rows = capacity_rows(capacity_factor, p.assignments, local_experts * waves);
  return p;
}

}  // namespace marin
