#pragma once
// Between the full parameter layout (ParamTable without expert parallelism: what checkpoints and
// every single-process tool hold) and an expert-parallel rank's layout (model/params.hpp: the
// dense tensors, then this rank's slice of every routed-expert stack). A stack [E, rows, cols] is
// split along its leading expert dimension, so rank j's slice is one contiguous block of the full
// tensor: converting is a copy per tensor, and gathering is one gatherv per stack.
#include "model/params.hpp"
#include "parallel/comm.hpp"

namespace marin {

// out (local layout) ← this rank's part of `in` (full layout). `local` may be the full table.
template <class T>
void take_shard(const ParamTable& full, const T* in, const ParamTable& local, T* out);

// Collective over the expert-parallel group `ep` (rank j holds shard j; the one-process group
// when there is no expert parallelism): rank 0 of `ep` receives in `out` (full layout) every
// tensor — the dense ones from itself, each stack assembled from all shards. `out` may be null
// on the other ranks.
void gather_shards(const ParamTable& local, const float* in, const ParamTable& full, float* out,
                   parallel::Comm& ep);

}  // namespace marin
