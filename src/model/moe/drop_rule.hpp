#pragma once
// The drop rule of a transport (recipe §8): decides which (token, slot) assignments are computed
// and in which order, grouped by expert so the experts run as one GEMM each (the token dispatcher,
// token_dispatcher.hpp, then moves the rows where this plan says). Dropless computes all of
// them; capacity-limited accepts at most ceil(capacity_factor·T·K/E) rows per expert, in arrival
// order (token-major), and drops the rest (keep = 0, no renormalisation). Pooled is the 535B run's
// first-phase transport (docs/distributed.md): per sender, A = T·K assignments to S expert shards
// in W waves; an assignment ranked i within its destination shard goes in wave i mod W, slot
// i div W, and is kept at the sender iff slot < ceil(cf·A/(S·W)); at the receiver each local
// expert keeps, per wave, the first ceil(cf·A/(E_loc·W)) rows in arrival order. One process is one
// sender and holds every expert (S = 1); expert parallelism over MPI brings S > 1.
//
// Recipe §8's capacity is per *step*, over the global batch. A training step that computes its
// batch as several micro-batches, on one rank or on many, calls begin_step(T) first: then each
// build() numbers its arrivals after those of the micro-batches before it in row order — the
// earlier waves of this step (`arrived`) plus, within a wave computed by a group of ranks at once,
// the lower ranks' (an exclusive scan of the per-rank counts) — so every layout drops exactly what
// one forward over the whole batch drops. Without begin_step a build is a step of its own.
#include <cstdint>
#include <string>

#include "core/buffer.hpp"
#include "model/pooled_capacity.hpp"

namespace marin::parallel {
class Comm;
class CommThread;
}  // namespace marin::parallel

namespace marin {

enum class Transport { Dropless, Capacity, Pooled };
Transport parse_transport(const std::string& name);
const char* transport_name(Transport t);

// A model's dispatch settings (Model::set_dispatch): the transport, the pooled transport's waves,
// and the ranks that compute each wave of micro-batches together (a capacity-limited transport
// numbers arrivals over all of them; null: this process alone), and the communication thread the
// expert-parallel exchanges run on (null: on the calling thread, nothing overlapped).
struct DispatchSettings {
  Transport transport = Transport::Dropless;
  int64_t waves = 3;
  parallel::Comm* group = nullptr;
  parallel::CommThread* thread = nullptr;
};

// How a forward dispatches: the transport, the pooled transport's waves, the ranks that compute a
// wave of micro-batches together (capacity; null: this process alone), and the expert-parallel
// group the experts are split over (null: every expert is here), and the communication thread
// its exchanges run on (DispatchSettings::thread).
struct Dispatch {
  Transport transport = Transport::Dropless;
  int64_t waves = 3;
  parallel::Comm* group = nullptr;
  parallel::Comm* experts = nullptr;
  parallel::CommThread* thread = nullptr;
  Dispatch(Transport t = Transport::Dropless, int64_t w = 3, parallel::Comm* g = nullptr,
           parallel::Comm* ep = nullptr, parallel::CommThread* th = nullptr)
      : transport(t), waves(w), group(g), experts(ep), thread(th) {}
  int64_t expert_shards() const;
};

struct DispatchPlan {
  int64_t E = 0, K = 0, rows = 0;
  Buffer<int64_t> offsets;    // [E+1]: expert e owns grouped rows offsets[e] .. offsets[e+1]
  Buffer<int32_t> row_token;  // [rows·K] grouped row → token
  Buffer<int32_t> row_slot;   // [rows·K] grouped row → slot k of that token
  Buffer<int64_t> slot_row;   // [rows·K] (token, k) → grouped row, −1 when dropped
  Buffer<int64_t> requested;  // [E] assignments each expert was asked for (its load)
  Buffer<int64_t> cursor;     // [E] scratch for the counting sort
  Buffer<int64_t> before;     // [E] arrivals at each expert earlier in the step (capacity)
  Buffer<int64_t> arrived;    // [E] arrivals of the step's completed waves (capacity)
  Buffer<int64_t> wave_rank;  // [E·W] pooled: rows per (expert, wave) seen at the receiver
  Buffer<int64_t> wave_of;    // [rows·K] pooled: the wave of each assignment kept by the sender
  int64_t kept = 0, dropped = 0;
  int64_t sender_dropped = 0, receiver_dropped = 0;  // pooled: where the drops happened
  PooledCapacity pooled;  // pooled: the capacities the last decision used (marin plan's rule)
  int64_t step_assignments = 0;  // T·K of the whole step (0: this build alone)

  void reserve(int64_t max_rows, int64_t E, int64_t K);
  // A step of `tokens` tokens begins: capacity from T = tokens, no arrivals yet.
  void begin_step(int64_t tokens);
  // expert: [rows, K] selected experts. Collective over d.group for capacity transport.
  void build(const int32_t* expert, int64_t rows, const Dispatch& d, double capacity_factor);

 private:
  // keep[a] (in slot_row, as 0 / −1) of every assignment under the transport; fills requested.
  void decide(const int32_t* expert, int64_t A, const Dispatch& d, double capacity_factor);
  void decide_pooled(const int32_t* expert, int64_t A, const Dispatch& d, double capacity_factor);
};

}  // namespace marin
