#pragma once
// Reproducible gradient summation (docs/distributed.md, "Determinism"). A training step's
// gradient is the sum of the gradients of its micro-batches. Summed in floating point, that sum
// depends on how the micro-batches are spread over ranks (the reduction order), and a difference
// in the last bit is enough to move a QB histogram margin across a bin edge and flip a routing
// decision a few steps later. So the partial gradients are summed exactly instead: per tensor,
// every value is converted to a 64-bit fixed-point integer with a scale of 2^s chosen from the
// tensor's global maximum (so that the sum of all units cannot overflow), the integers are
// added (exact, hence independent of order) locally and over the ranks, and the sum is rounded
// once back to float. The result is bit-identical for any number of ranks and any assignment of
// micro-batches to them; its error is below 2^-58 of the tensor's largest element. In one process
// (no region has a rank to send to) each tensor is converted, summed and rounded a chunk at a
// time, so the 64-bit accumulator of the whole buffer is never mapped.
#include <cstdint>
#include <span>
#include <vector>

#include "core/buffer.hpp"
#include "parallel/comm.hpp"

namespace marin::parallel {

//
// Expert parallelism splits the buffer into regions summed over different groups: the dense
// tensors over every rank, an expert shard's slices over the data-parallel replicas that hold the
// same shard (each expert's gradient of a micro-batch is computed where the expert lives). The
// scale of a tensor still comes from its maximum over all ranks, so every layout rounds alike.

struct Segment {
  int64_t offset = 0, size = 0;  // one tensor of the flat buffer (its own scale)
};

// A region of the buffer, the ranks that sum it (null: this process alone), and the
// consecutive ranges of it the ranks of that group receive the sum of (Σ sizes = its size).
struct SumRegion {
  Range range;
  Comm* group = nullptr;
  std::vector<Range> shards;
};

// One partial gradient: the elements [covers.begin, covers.end) of the flat buffer, data[0] being
// element covers.begin.
struct Partial {
  const float* data = nullptr;
  Range covers;
};

class ExactSum {
 public:
  // segments: the tensors of a flat buffer of `total` elements, each inside one region; regions
  // tile [0, total) in order.
  ExactSum(std::vector<Segment> segments, int64_t total, std::vector<SumRegion> regions);

  // partials: this rank's partial gradients (a micro-batch's, or an expert shard's part of one);
  // each element of the buffer receives at most `units` partials over all ranks. Writes the exact
  // sum into out[shard of this rank] of every region and returns true; returns false (out
  // untouched) when any element of any partial is NaN or ±Inf. Collective over `world` (every
  // rank of every region's group).
  bool reduce(std::span<const Partial> partials, int64_t units, Comm& world, float* out);

  // reduce() in pieces, so that the sum of a finished part of the buffer can run while the rest
  // is still being computed (StepEngine's overlap): sum_range once for each of a set of ranges
  // that tile the buffer (each a run of whole tensors inside one region, in the same order on
  // every rank), then finish(). The result is reduce()'s bit for bit: every tensor keeps its own
  // scale and integers add exactly in any grouping. sum_range is collective over `world`;
  // finish is local and returns false when any range held a NaN or ±Inf.
  void sum_range(Range range, std::span<const Partial> partials, int64_t units, Comm& world);
  bool finish(float* out);
  // Fully sharded state (--shard-params): once a range is reduce-scattered, the accumulator's
  // pages outside this rank's shard are given back to the kernel (the next step maps them again),
  // so the accumulator takes memory for one range at a time plus this rank's shard.
  void set_release_unowned(bool on) { release_unowned_ = on; }

 private:
  // reduce() where no region has a rank to send to: the same bits, chunk by chunk, without acc_.
  bool reduce_here(std::span<const Partial> partials, int64_t units, Comm& world, float* out);
  // The global maxima of segments [s0, s1) into max_ (collective); false once any is not finite.
  bool maxima(size_t s0, size_t s1, std::span<const Partial> partials, Comm& world);

  std::vector<Segment> segs_;
  std::vector<SumRegion> regions_;
  std::vector<std::vector<int64_t>> shard_sizes_;  // per region: the reduce-scatter's counts
  std::vector<double> max_;                        // per segment
  Buffer<int64_t> acc_;
  std::vector<int64_t> chunk_;  // reduce_here's
  bool communicates_ = false;   // some region's group has more than one rank
  bool release_unowned_ = false;
  bool finite_ = true;  // every range summed since the last finish() was finite
  int head_ = 0;        // ceil(log2 units) of those sums
};

}  // namespace marin::parallel
