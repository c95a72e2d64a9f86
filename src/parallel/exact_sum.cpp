#include "parallel/exact_sum.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "kernels/kernels.hpp"

namespace marin::parallel {

namespace {
// The fixed-point shift of a tensor whose largest |x| is m, for sums of 2^head terms.
int shift_of(double m, int head) {
  return 62 - head - (std::ilogb(m) + 1);
}
// The factor to fixed point (sign +1) or back to float (sign −1) of such a tensor; 0 for an
// all-zero one (its sum is zero).
double scale_of(double m, int head, int sign) {
  return m == 0 ? 0.0 : std::ldexp(1.0, sign * shift_of(m, head));
}
// True when partial p holds all of tensor g.
bool covers(const Segment& g, const Partial& p) {
  return g.offset >= p.covers.begin && g.offset + g.size <= p.covers.end;
}
}  // namespace

ExactSum::ExactSum(std::vector<Segment> segments, int64_t total, std::vector<SumRegion> regions)
    : segs_(std::move(segments)), regions_(std::move(regions)), max_(segs_.size(), 0.0) {
  int64_t at = 0;
  for (auto& w : regions_) {
    MARIN_CHECK(w.range.begin == at, "exact sum: regions must tile the buffer in order");
    at = w.range.end;
    int64_t covered = 0;
    std::vector<int64_t> sizes;
    for (auto& r : w.shards) covered += r.size(), sizes.push_back(r.size());
    MARIN_CHECK(covered == w.range.size(), "exact sum: shards cover {} of {} elements", covered,
                w.range.size());
    shard_sizes_.push_back(std::move(sizes));
  }
  MARIN_CHECK(at == total, "exact sum: regions cover {} of {} elements", at, total);
  acc_.resize(size_t(total));  // mapped on first touch: never, in one process (reduce_here)
  for (const SumRegion& w : regions_) communicates_ |= w.group && w.group->size() > 1;
}

bool ExactSum::reduce(std::span<const Partial> partials, int64_t units, Comm& world, float* out) {
  if (!communicates_) return reduce_here(partials, units, world, out);
  for (const SumRegion& w : regions_) sum_range(w.range, partials, units, world);
  return finish(out);
}

bool ExactSum::reduce_here(std::span<const Partial> partials, int64_t units, Comm& world,
                           float* out) {
  // No rank to send to: each tensor is converted, summed and rounded back a chunk at a time,
  // element by element what the three steps over the whole buffer do, and acc_ is never touched
  // (its pages are never mapped: 8 bytes a parameter less).
  MARIN_CHECK(units >= 1, "exact sum: {} units", units);
  if (!maxima(0, segs_.size(), partials, world)) {
    finite_ = true;  // the next step starts clean
    return false;
  }
  const int head = int(std::ceil(std::log2(double(units))));
  constexpr int64_t kChunk = 16384;
  chunk_.resize(kChunk);
  std::vector<const float*> xs;
  for (size_t s = 0; s < segs_.size(); ++s) {
    const Segment& g = segs_[s];
    const double scale = scale_of(max_[s], head, +1);
    const double inv = scale_of(max_[s], head, -1);
    for (int64_t at = 0; at < g.size; at += kChunk) {
      const int64_t n = std::min(kChunk, g.size - at);
      xs.clear();
      if (max_[s] != 0)
        for (const Partial& p : partials)
          if (covers(g, p)) xs.push_back(p.data + (g.offset - p.covers.begin) + at);
      kernels::fixed_point_sum(xs.data(), int(xs.size()), n, scale, chunk_.data());
      kernels::fixed_point_to_float(chunk_.data(), n, inv, out + g.offset + at);
    }
  }
  return true;
}

bool ExactSum::maxima(size_t s0, size_t s1, std::span<const Partial> partials, Comm& world) {
  // Per-tensor global max |x| (+inf for a non-finite value: the step is skipped).
  const double inf = std::numeric_limits<double>::infinity();
  for (size_t s = s0; s < s1; ++s) {
    float m = 0;
    for (const Partial& p : partials)
      if (covers(segs_[s], p))
        m = std::max(m,
                     kernels::max_abs(p.data + (segs_[s].offset - p.covers.begin), segs_[s].size));
    max_[s] = std::isfinite(m) ? double(m) : inf;
  }
  world.allreduce(max_.data() + s0, int64_t(s1 - s0), Op::Max);
  for (size_t s = s0; s < s1; ++s)
    if (!(max_[s] < inf)) finite_ = false;
  return finite_;
}

void ExactSum::sum_range(Range range, std::span<const Partial> partials, int64_t units,
                         Comm& world) {
  MARIN_CHECK(units >= 1, "exact sum: {} units", units);
  // The tensors of the range (segments are in buffer order).
  const auto first = std::lower_bound(segs_.begin(), segs_.end(), range.begin,
                                      [](const Segment& g, int64_t at) { return g.offset < at; });
  size_t s0 = size_t(first - segs_.begin()), s1 = s0;
  while (s1 < segs_.size() && segs_[s1].offset + segs_[s1].size <= range.end) ++s1;
  MARIN_CHECK(s0 < segs_.size() && segs_[s0].offset == range.begin &&
                  (s1 == segs_.size() ? range.end >= segs_.back().offset + segs_.back().size
                                      : segs_[s1].offset == range.end),
              "exact sum: [{}, {}) is not a run of whole tensors", range.begin, range.end);
  // 1. Per-tensor global max |x|; a non-finite one is the same decision on every rank: nothing
  // more is summed this step.
  if (!maxima(s0, s1, partials, world)) return;
  // 2. Fixed point: |x|·2^shift < 2^62 / 2^ceil(log2 units), so any sum of `units` terms fits.
  // Every element of every tensor is written (0 where this rank holds no partial of it), so the
  // buffer needs no clearing between steps.
  const int head = int(std::ceil(std::log2(double(units))));
  std::vector<const float*> xs;
  for (size_t s = s0; s < s1; ++s) {
    xs.clear();
    if (max_[s] != 0)  // all zero: the sum is zero
      for (const Partial& p : partials)
        if (covers(segs_[s], p)) xs.push_back(p.data + (segs_[s].offset - p.covers.begin));
    const double scale = scale_of(max_[s], head, +1);
    kernels::fixed_point_sum(xs.data(), int(xs.size()), segs_[s].size, scale,
                             acc_.data() + segs_[s].offset);
  }
  // 3. Exact integer sum over the group of each region the range lies in, each rank receiving
  // the part of the range inside its shard.
  head_ = head;
  for (size_t w = 0; w < regions_.size(); ++w) {
    Comm* g = regions_[w].group;
    const int64_t b = std::max(range.begin, regions_[w].range.begin);
    const int64_t e = std::min(range.end, regions_[w].range.end);
    if (!g || g->size() == 1 || b >= e) continue;
    std::vector<int64_t> counts;
    for (const Range& r : regions_[w].shards)
      counts.push_back(std::max<int64_t>(0, std::min(e, r.end) - std::max(b, r.begin)));
    g->reduce_scatter(acc_.data() + b, counts.data());
    if (release_unowned_) {
      const Range own = regions_[w].shards[size_t(g->rank())];
      acc_.release_pages_except(size_t(b), size_t(e), size_t(own.begin), size_t(own.end));
    }
  }
}

bool ExactSum::finish(float* out) {
  const bool finite = finite_;
  finite_ = true;
  if (!finite) return false;
  // 4. One rounding back to float.
  for (auto& w : regions_) {
    const Range own = w.shards[size_t(w.group ? w.group->rank() : 0)];
    for (size_t s = 0; s < segs_.size(); ++s) {
      const int64_t b = std::max(own.begin, segs_[s].offset);
      const int64_t e = std::min(own.end, segs_[s].offset + segs_[s].size);
      if (b >= e) continue;
      const double inv = scale_of(max_[s], head_, -1);
      kernels::fixed_point_to_float(acc_.data() + b, e - b, inv, out + b);
    }
  }
  return true;
}

}  // namespace marin::parallel
