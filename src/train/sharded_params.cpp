#include "train/sharded_params.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/timer.hpp"

namespace marin {

ShardedParams::ShardedParams(const std::vector<parallel::Range>& units,
                             std::vector<parallel::Range> shards, Buffer<float>& params,
                             parallel::Comm& comm)
    : shards_(std::move(shards)), params_(params), comm_(comm) {
  MARIN_CHECK(int(shards_.size()) == comm_.size(), "sharded parameters: {} shards for {} ranks",
              shards_.size(), comm_.size());
  for (const parallel::Range& r : units) {
    Unit u{r, {}, {}};
    for (const parallel::Range& s : shards_) {
      const int64_t b = std::clamp(s.begin, r.begin, r.end), e = std::clamp(s.end, r.begin, r.end);
      u.counts.push_back(std::max<int64_t>(0, e - b));
      u.displs.push_back(b - r.begin);
    }
    units_.push_back(std::move(u));
  }
}

void ShardedParams::gather(Unit& u) {
  const int me = comm_.rank();
  float* at = params_.data() + u.range.begin;
  // In place: this rank's part already sits at its displacement.
  comm_.allgatherv(at + u.displs[size_t(me)], u.counts[size_t(me)], at, u.counts.data(),
                   u.displs.data());
}

void ShardedParams::start(int i) {
  if (i < 0 || i >= int(units_.size())) return;
  Unit& u = units_[size_t(i)];
  if (u.present || u.pending) return;
  u.pending = thread_->submit([this, &u] { gather(u); });
}

void ShardedParams::acquire(int i, Pass pass) {
  Unit& u = units_[size_t(i)];
  if (thread_) {
    start(i);
    seconds_ += thread_->wait(u.pending);
    u.pending = 0;
    u.present = true;
    start(pass == Pass::Forward ? i + 1 : i - 1);  // while unit i is computed
    return;
  }
  MARIN_CHECK(!u.pending, "sharded parameters: unit {} is still being gathered on a thread", i);
  if (!u.present) {
    const Timer t;
    gather(u);
    seconds_ += t.seconds();
  }
  u.present = true;
}

void ShardedParams::release(int i) {
  Unit& u = units_[size_t(i)];
  if (u.pending) return;  // a prefetched unit stays until it is used
  const parallel::Range mine = own();
  params_.release_pages_except(size_t(u.range.begin), size_t(u.range.end), size_t(mine.begin),
                               size_t(mine.end));
  u.present = false;
}

void ShardedParams::release_all() {
  for (int i = 0; i < int(units_.size()); ++i) release(i);
}

void ShardedParams::gather_all() {
  for (Unit& u : units_) {
    if (!u.present) gather(u);
    u.present = true;
  }
}

WholeParams::WholeParams(Model<float>& model, ShardedParams* shards)
    : model_(model), shards_(shards) {
  if (!shards_) return;
  shards_->gather_all();
  model_.set_param_gate(nullptr);
}

WholeParams::~WholeParams() {
  if (!shards_) return;
  shards_->release_all();
  model_.set_param_gate(shards_);
}

Buffer<float> ShardedParams::gather_on_root() {
  const bool root = comm_.is_root();
  Buffer<float> out(root ? params_.size() : 0);
  std::vector<int64_t> counts, displs;
  for (const parallel::Range& s : shards_) counts.push_back(s.size()), displs.push_back(s.begin);
  const parallel::Range mine = own();
  comm_.gatherv(params_.data() + mine.begin, mine.size(), root ? out.data() : nullptr,
                counts.data(), displs.data());
  if (root) {  // the expert slices of an expert-parallel shard: this rank's own
    const int64_t dense_end = shards_.back().end;
    std::copy(params_.begin() + dense_end, params_.end(), out.begin() + dense_end);
  }
  return out;
}

}  // namespace marin
