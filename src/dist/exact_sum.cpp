#include "dist/exact_sum.hpp"

#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace marin::dist {

ExactSum::ExactSum(std::vector<Segment> segments, int64_t total, std::vector<Range> shards)
    : segs_(std::move(segments)),
      total_(total),
      shards_(std::move(shards)),
      max_(segs_.size(), 0.0) {
  int64_t covered = 0;
  for (auto& r : shards_) covered += r.size(), shard_sizes_.push_back(r.size());
  MARIN_CHECK(covered == total, "exact sum: shards cover {} of {} elements", covered, total);
  acc_.resize(size_t(total));
}

bool ExactSum::reduce(std::span<const float* const> partials, int64_t units, Comm& comm,
                      float* out) {
  MARIN_CHECK(units >= 1 && int64_t(partials.size()) <= units,
              "exact sum: {} local partials of {} units", partials.size(), units);
  // 1. Per-tensor global max |x| (+inf for a non-finite value: the step is skipped).
  const double inf = std::numeric_limits<double>::infinity();
  for (size_t s = 0; s < segs_.size(); ++s) {
    float m = 0;
    bool finite = true;
    for (const float* p : partials) {
      const float* x = p + segs_[s].offset;
      for (int64_t i = 0; i < segs_[s].size; ++i) {
        const float a = std::fabs(x[i]);
        finite &= std::isfinite(a);
        m = a > m ? a : m;
      }
    }
    max_[s] = finite ? double(m) : inf;
  }
  comm.allreduce(max_.data(), int64_t(max_.size()), Op::Max);
  for (double m : max_)
    if (!(m < inf)) return false;
  // 2. Fixed point: |x|·2^shift < 2^62 / 2^ceil(log2 units), so any sum of `units` terms fits.
  const int head = int(std::ceil(std::log2(double(units))));
  auto shift_of = [&](double m) { return 62 - head - (std::ilogb(m) + 1); };
  acc_.zero();
  for (size_t s = 0; s < segs_.size(); ++s) {
    if (max_[s] == 0) continue;  // all zero: the sum is zero
    const double scale = std::ldexp(1.0, shift_of(max_[s]));
    int64_t* a = acc_.data() + segs_[s].offset;
    for (const float* p : partials) {
      const float* x = p + segs_[s].offset;
      for (int64_t i = 0; i < segs_[s].size; ++i) a[i] += std::llrint(double(x[i]) * scale);
    }
  }
  // 3. Exact integer sum over the ranks, each receiving its shard.
  if (comm.size() > 1) comm.reduce_scatter(acc_.data(), shard_sizes_.data());
  // 4. One rounding back to float.
  const Range own = shards_[size_t(comm.rank())];
  for (size_t s = 0; s < segs_.size(); ++s) {
    const int64_t b = std::max(own.begin, segs_[s].offset);
    const int64_t e = std::min(own.end, segs_[s].offset + segs_[s].size);
    if (b >= e) continue;
    const double inv = max_[s] == 0 ? 0.0 : std::ldexp(1.0, -shift_of(max_[s]));
    for (int64_t i = b; i < e; ++i) out[i] = float(double(acc_[i]) * inv);
  }
  return true;
}

}  // namespace marin::dist
