#pragma once
// What one rank of a training run holds in memory, part by part, as StepEngine allocates it
// (docs/distributed.md, "Memory per rank"): `marin plan --ranks N` reports it and `marin bench
// --train` prints it beside the peak resident memory it measures. Without --shard-params every
// rank holds the whole dense model, its gradient and the exact sum's 64-bit accumulator; with it,
// its own run of each (1/N) plus the two units (blocks) in flight, a gathered one and a prefetched
// or still-summing one. The optimizer state is sharded either way (ZeRO-1).
#include <cstdint>

#include <nlohmann/json.hpp>

#include "train/train_options.hpp"

namespace marin {

struct RankMemory {         // bytes on the largest rank
  int64_t weights = 0;      // fp32 values resident (all, or the rank's run + units in flight)
  int64_t gradients = 0;    // the model's gradient (same rule) and the expert gradients by source
  int64_t partials = 0;     // earlier micro-batches' gradients, kept for the exact sum
  int64_t accumulator = 0;  // the exact sum's 64-bit fixed-point values
  int64_t optimizer = 0;    // m and v of the rank's optimizer shard
  int64_t rollback = 0;     // UpdateGuard's copy of what the update changes, less what the
                            // partials hold (it borrows them)
  int64_t weight_copy = 0;  // the bf16 copy and its GEMM layouts (0 in fp32; not sharded)
  int64_t activations = 0;  // saved activations and workspace of one micro-batch
  int64_t total() const;
  nlohmann::json json() const;
};

// For options `o` (micro_batch resolved or 0 for the default) over `ranks` ranks, computing in
// `bf16` or fp32.
RankMemory rank_memory(const TrainOptions& o, int ranks, bool bf16);

}  // namespace marin
