#pragma once
// Fully sharded dense parameters (--shard-params, ZeRO-3 / FSDP style; docs/distributed.md, "Fully
// sharded parameters"). Every rank keeps resident only its optimizer shard of the dense region
// (the run of the table ZeRO-1 gives it, Optimizer::Region) and the units of the model in use. The
// model acquires each unit (the embedding, each block, the final norm and head: Model::param_units)
// before it reads it: the unit is all-gathered from the ranks whose runs cover it, and released
// after use, its pages outside this rank's run given back to the kernel. The values gathered are
// the owners' bits, so a run is bit-identical to one with every parameter present everywhere.
//
// With a communication thread (the backward's overlap), the gathers run there, in line with the
// gradient sums, and the gather of the next unit starts as soon as one is acquired (prefetch).
#include <cstdint>
#include <utility>
#include <vector>

#include "core/buffer.hpp"
#include "model/model.hpp"
#include "parallel/comm.hpp"
#include "parallel/comm_thread.hpp"

namespace marin {

class ShardedParams final : public ParamGate {
 public:
  // units: Model::param_units() (inside the dense region); shards: each rank's run of the dense
  // region (Optimizer::Region::shards, in rank order of `comm`); params: the model's values.
  ShardedParams(const std::vector<parallel::Range>& units, std::vector<parallel::Range> shards,
                Buffer<float>& params, parallel::Comm& comm);

  void acquire(int u, Pass pass) override;
  void release(int u) override;
  void prefetch(int u) override {
    if (thread_) start(u);
  }
  // Every unit released (after the parameters were set whole: init, a loaded checkpoint).
  void release_all();
  // Every unit gathered (collective; on the calling thread).
  void gather_all();
  // While set (non-null), gathers run as jobs of `thread`, the next unit's started early; the
  // caller makes no MPI call of its own meanwhile. Null: on the calling thread.
  void set_thread(parallel::CommThread* thread) { thread_ = thread; }
  // The seconds acquire() blocked since the last call (gathers the compute waited for).
  double take_seconds() { return std::exchange(seconds_, 0.0); }
  // This rank's run of the dense region.
  parallel::Range own() const { return shards_[size_t(comm_.rank())]; }
  // Collective: a copy of the model's values (the local table's layout) with the dense region
  // complete, on rank 0; empty on the other ranks. For a checkpoint in the full format.
  Buffer<float> gather_on_root();

 private:
  struct Unit {
    parallel::Range range;
    std::vector<int64_t> counts, displs;  // each rank's part of the unit, from range.begin
    bool present = false;
    uint64_t pending = 0;  // the ticket of its gather on the thread (0: none queued)
  };
  void gather(Unit& u);  // collective over comm_
  // Starts unit u's gather on the thread (if it is not present or on its way already).
  void start(int u);

  std::vector<parallel::Range> shards_;
  std::vector<Unit> units_;
  Buffer<float>& params_;
  parallel::Comm& comm_;
  parallel::CommThread* thread_ = nullptr;
  double seconds_ = 0;
};

// While it lives, every unit of a sharded model is present and the model's gate is off
// (collective at both ends): for work that runs the model outside a step in a pattern of its own.
// The per-domain evaluation and the tasks split their documents unevenly over the ranks, so their
// forwards cannot gather in lockstep, and the tasks decode. `shards` null: nothing to do.
class WholeParams {
 public:
  WholeParams(Model<float>& model, ShardedParams* shards);
  ~WholeParams();
  WholeParams(const WholeParams&) = delete;
  WholeParams& operator=(const WholeParams&) = delete;

 private:
  Model<float>& model_;
  ShardedParams* shards_;
};

}  // namespace marin
