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
// micro-batches to them; its error is below 2^-58 of the tensor's largest element.
#include <cstdint>
#include <span>
#include <vector>

#include "core/buffer.hpp"
#include "dist/comm.hpp"

namespace marin::dist {

struct Segment {
  int64_t offset = 0, size = 0;  // one tensor of the flat buffer (its own scale)
};

class ExactSum {
 public:
  // segments: the tensors of a flat buffer of `total` elements; shards: the consecutive
  // ranges of that buffer each rank of `comm` receives the sum of (Σ sizes = total).
  ExactSum(std::vector<Segment> segments, int64_t total, std::vector<Range> shards);

  // partials: this rank's micro-batch gradients (each `total` elements); units: the number of
  // micro-batches over all ranks. Writes the exact sum into out[shard of this rank] and returns
  // true; returns false (out untouched) when any element of any partial is NaN or ±Inf.
  // Collective over comm.
  bool reduce(std::span<const float* const> partials, int64_t units, Comm& comm, float* out);

 private:
  std::vector<Segment> segs_;
  int64_t total_;
  std::vector<Range> shards_;
  std::vector<int64_t> shard_sizes_;  // the reduce-scatter's counts
  std::vector<double> max_;           // per segment
  Buffer<int64_t> acc_;
};

}  // namespace marin::dist
