#pragma once
// Token dispatcher (the "transport"): decides which (token, slot) assignments are computed and in
// which order, grouped by expert so the experts run as one GEMM each. Dropless computes all of
// them; capacity-limited accepts at most ceil(capacity_factor·T·K/E) rows per expert, in arrival
// order (token-major), and drops the rest (keep = 0, no renormalisation). Under data parallelism
// the capacity is over the *global* batch (recipe §8): T is summed over the group and each rank's
// arrivals at an expert are numbered after those of the lower ranks (an exclusive scan of the
// per-rank counts), so N ranks drop exactly what one process drops for the same rows.
#include <cstdint>
#include <string>

#include "core/buffer.hpp"

namespace marin::dist {
class Comm;
}

namespace marin {

enum class Transport { Dropless, Capacity };
Transport parse_transport(const std::string& name);
const char* transport_name(Transport t);

struct DispatchPlan {
  int64_t E = 0, K = 0, rows = 0;
  Buffer<int64_t> offsets;    // [E+1]: expert e owns grouped rows offsets[e] .. offsets[e+1]
  Buffer<int32_t> row_token;  // [rows·K] grouped row → token
  Buffer<int32_t> row_slot;   // [rows·K] grouped row → slot k of that token
  Buffer<int64_t> slot_row;   // [rows·K] (token, k) → grouped row, −1 when dropped
  Buffer<int64_t> requested;  // [E] assignments each expert was asked for (its load)
  Buffer<int64_t> cursor;     // [E] scratch for the counting sort
  Buffer<int64_t> before;     // [E] arrivals at each expert from lower ranks (capacity, DP)
  int64_t kept = 0, dropped = 0;
  int64_t global_assignments = 0;  // T·K over the data-parallel group (capacity)

  void reserve(int64_t max_rows, int64_t E, int64_t K);
  // expert: [rows, K] selected experts. `group`: the data-parallel ranks that share one global
  // batch (null or size 1: this process alone). Collective over `group` for capacity transport.
  void build(const int32_t* expert, int64_t rows, Transport t, double capacity_factor,
             dist::Comm* group = nullptr);
};

}  // namespace marin
