#include "model/moe/drop_rule.hpp"

#include <cmath>

#include "core/error.hpp"
#include "model/pooled_capacity.hpp"
#include "parallel/comm.hpp"

namespace marin {

Transport parse_transport(const std::string& name) {
  if (name == "dropless") return Transport::Dropless;
  if (name == "capacity") return Transport::Capacity;
  if (name == "pooled") return Transport::Pooled;
  fail("unknown transport '{}' (expected dropless, capacity or pooled)", name);
}

const char* transport_name(Transport t) {
  switch (t) {
    case Transport::Dropless:
      return "dropless";
    case Transport::Capacity:
      return "capacity";
    case Transport::Pooled:
      return "pooled";
  }
  return "?";
}

int64_t Dispatch::expert_shards() const {
  return experts ? experts->size() : 1;
}

void DispatchPlan::reserve(int64_t max_rows, int64_t e, int64_t k) {
  E = e;
  K = k;
  offsets.resize(E + 1);
  requested.resize(E);
  cursor.resize(E);
  before.resize(E);
  arrived.resize(E);
  row_token.resize(max_rows * K);
  row_slot.resize(max_rows * K);
  slot_row.resize(max_rows * K);
  wave_of.resize(max_rows * K);
}

void DispatchPlan::begin_step(int64_t tokens) {
  step_assignments = tokens * K;
  arrived.zero();
}

void DispatchPlan::decide(const int32_t* expert, int64_t A, const Dispatch& d,
                          double capacity_factor) {
  for (int64_t e = 0; e < E; ++e) requested[e] = 0;
  for (int64_t a = 0; a < A; ++a) requested[expert[a]]++;
  sender_dropped = receiver_dropped = 0;
  if (d.transport == Transport::Dropless) {
    for (int64_t a = 0; a < A; ++a) slot_row[a] = 0;
    return;
  }
  if (d.transport == Transport::Pooled) return decide_pooled(expert, A, d, capacity_factor);
  // Capacity (recipe §8): the step's arrivals at expert e are numbered from before[e].
  const bool in_step = step_assignments > 0;
  const bool wave = d.group && d.group->size() > 1;
  for (int64_t e = 0; e < E; ++e) before[e] = wave ? requested[e] : 0;
  if (wave) d.group->exscan_sum(before.data(), E);
  if (in_step)
    // seam: per-expert arrival counts of the capacity rule (integers)
    for (int64_t e = 0; e < E; ++e) before[e] += arrived[e];
  const double total = double(in_step ? step_assignments : A);
  MARIN_CHECK(capacity_factor > 0 && capacity_factor * total / double(E) < 9e18,
              "capacity_factor {} gives no representable capacity (expected > 0 and "
              "capacity_factor·T·K/E < 9e18)",
              capacity_factor);
  const int64_t cap = capacity_rows(capacity_factor, int64_t(total), E);
  for (int64_t e = 0; e < E; ++e) cursor[e] = before[e];
  for (int64_t a = 0; a < A; ++a) slot_row[a] = cursor[expert[a]]++ < cap ? 0 : -1;
  if (in_step) {
    // The whole wave's arrivals count for the micro-batches after it.
    for (int64_t e = 0; e < E; ++e) cursor[e] = requested[e];
    if (wave) d.group->allreduce(cursor.data(), E);
    // seam: per-expert arrival counts (integers)
    for (int64_t e = 0; e < E; ++e) arrived[e] += cursor[e];
  }
}

void DispatchPlan::decide_pooled(const int32_t* expert, int64_t A, const Dispatch& d,
                                 double capacity_factor) {
  const int64_t W = d.waves, S = d.expert_shards(), E_loc = E / S;
  MARIN_CHECK(W >= 1, "pooled transport: waves must be >= 1, got {}", W);
  MARIN_CHECK(E % S == 0, "pooled transport: {} experts over {} shards", E, S);
  const PooledCapacity cap = pooled_capacity(A / K, K, S, E_loc, W, capacity_factor);
  pooled = cap;
  if (wave_rank.size() != size_t(E * W)) wave_rank.resize(size_t(E * W));
  wave_rank.zero();
  // Sender: an assignment ranked i within its destination shard goes in wave i mod W, slot
  // i div W, and stays iff the slot fits the pool.
  for (int64_t e = 0; e < S; ++e) cursor[e] = 0;
  for (int64_t a = 0; a < A; ++a) {
    const int64_t i = cursor[expert[a] / E_loc]++;
    const int64_t wave = i % W, slot = i / W;
    if (slot >= cap.sender_rows) {
      slot_row[a] = -1, wave_of[a] = -1, ++sender_dropped;
      continue;
    }
    wave_of[a] = wave;
    wave_rank[expert[a] * W + wave]++;
  }
  // Receiver: the arrivals of lower sender ranks at each (expert, wave) come first.
  if (S > 1)
    d.experts->exscan_sum(wave_rank.data(), E * W);
  else
    wave_rank.zero();
  // seam: the counting sort of assignments by expert (integers)
  for (int64_t a = 0; a < A; ++a) {
    if (wave_of[a] < 0) continue;
    const bool fits = wave_rank[expert[a] * W + wave_of[a]]++ < cap.receiver_rows;
    slot_row[a] = fits ? 0 : -1;
    receiver_dropped += !fits;
  }
}

void DispatchPlan::build(const int32_t* expert, int64_t n, const Dispatch& d,
                         double capacity_factor) {
  rows = n;
  const int64_t A = n * K;
  decide(expert, A, d, capacity_factor);
  // Group the kept assignments by expert, in arrival order (token-major, then slot): a counting
  // sort.
  for (int64_t e = 0; e <= E; ++e) offsets[e] = 0;
  for (int64_t a = 0; a < A; ++a)
    if (slot_row[a] == 0) offsets[expert[a] + 1]++;
  // seam: prefix sum of per-expert row counts (integers)
  for (int64_t e = 0; e < E; ++e) offsets[e + 1] += offsets[e], cursor[e] = offsets[e];
  kept = offsets[E];
  dropped = A - kept;
  for (int64_t a = 0; a < A; ++a) {
    if (slot_row[a] < 0) continue;
    const int64_t r = cursor[expert[a]]++;
    row_token[r] = int32_t(a / K);
    row_slot[r] = int32_t(a % K);
    slot_row[a] = r;
  }
}

}  // namespace marin
