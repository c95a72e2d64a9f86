#include "model/moe/dispatcher.hpp"

#include <cmath>

#include "core/error.hpp"
#include "dist/comm.hpp"

namespace marin {

Transport parse_transport(const std::string& name) {
  if (name == "dropless") return Transport::Dropless;
  if (name == "capacity") return Transport::Capacity;
  fail("unknown transport '{}' (expected dropless or capacity)", name);
}

const char* transport_name(Transport t) {
  return t == Transport::Dropless ? "dropless" : "capacity";
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
}

void DispatchPlan::begin_step(int64_t tokens) {
  step_assignments = tokens * K;
  arrived.zero();
}

void DispatchPlan::build(const int32_t* expert, int64_t n, Transport t, double capacity_factor,
                         dist::Comm* group) {
  rows = n;
  const int64_t A = n * K;
  for (int64_t e = 0; e < E; ++e) requested[e] = 0;
  for (int64_t a = 0; a < A; ++a) requested[expert[a]]++;
  const bool capacity = t == Transport::Capacity;
  const bool in_step = step_assignments > 0;
  const bool wave = capacity && group && group->size() > 1;
  for (int64_t e = 0; e < E; ++e) before[e] = wave ? requested[e] : 0;
  if (wave) group->exscan_sum(before.data(), E);
  if (capacity && in_step)
    for (int64_t e = 0; e < E; ++e) before[e] += arrived[e];
  const double total = double(in_step ? step_assignments : A);
  MARIN_CHECK(!capacity || (capacity_factor > 0 && capacity_factor * total / double(E) < 9e18),
              "capacity_factor {} gives no representable capacity (expected > 0 and "
              "capacity_factor·T·K/E < 9e18)",
              capacity_factor);
  const int64_t cap =
      capacity ? static_cast<int64_t>(std::ceil(capacity_factor * total / double(E))) : A;
  // Expert e accepts the step's arrivals [0, cap); this micro-batch's are numbered from before[e].
  auto room = [&](int64_t e) { return std::max<int64_t>(0, cap - before[e]); };
  offsets[0] = 0;
  for (int64_t e = 0; e < E; ++e) offsets[e + 1] = offsets[e] + std::min(requested[e], room(e));
  kept = offsets[E];
  dropped = A - kept;
  // Fill each expert's rows in arrival order (token-major, then slot): a counting sort.
  for (int64_t e = 0; e < E; ++e) cursor[e] = 0;
  for (int64_t a = 0; a < A; ++a) {
    const int32_t e = expert[a];
    if (cursor[e] < room(e)) {
      const int64_t r = offsets[e] + cursor[e]++;
      row_token[r] = int32_t(a / K);
      row_slot[r] = int32_t(a % K);
      slot_row[a] = r;
    } else {
      slot_row[a] = -1;
    }
  }
  if (capacity && in_step) {
    // The whole wave's arrivals count for the micro-batches after it.
    if (wave) {
      for (int64_t e = 0; e < E; ++e) cursor[e] = requested[e];
      group->allreduce(cursor.data(), E);
      for (int64_t e = 0; e < E; ++e) arrived[e] += cursor[e];
    } else {
      for (int64_t e = 0; e < E; ++e) arrived[e] += requested[e];
    }
  }
}

}  // namespace marin
