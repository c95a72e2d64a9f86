#pragma once
// Token dispatcher (the "transport"): decides which (token, slot) assignments are computed and in
// which order, grouped by expert so the experts run as one GEMM each. Dropless computes all of
// them; capacity-limited accepts at most ceil(capacity_factor·T·K/E) rows per expert, in arrival
// order (token-major), and drops the rest (keep = 0, no renormalisation). An MPI all-to-all
// transport is another implementation of the same plan.
#include <cstdint>
#include <string>

#include "core/buffer.hpp"

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
  int64_t kept = 0, dropped = 0;

  void reserve(int64_t max_rows, int64_t E, int64_t K);
  // expert: [rows, K] selected experts.
  void build(const int32_t* expert, int64_t rows, Transport t, double capacity_factor);
};

}  // namespace marin
