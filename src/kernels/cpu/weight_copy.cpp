// kernels::WeightCopy: the bf16 conversion of a model's weights, once per change of the weights
// instead of at every product. The live copies are kept in a list the GEMMs search (a handful:
// one per model of the process); the list is read under a shared lock, as products run
// concurrently under parallel_tasks. The blocked layouts of one copy are made by whichever
// product first needs them, under that copy's own lock.
#include "kernels/cpu/weight_copy.hpp"

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace marin::kernels {

namespace {
std::shared_mutex g_mutex;
std::vector<const WeightCopy*> g_copies;
}  // namespace

// A weight's blocked layout per (offset, transposed, K, N): the forward reads W [in,out], the
// backward Wᵀ, and oneDNN picks its layout from K and N alone (measured: the same for every row
// count and with or without the beta post-op), so a weight holds at most two. Their memory is
// kept from refresh to refresh and reordered into again at the first use after one: allocating
// it afresh every step cost the kernel's zeroing and mapping of ~120 MB of pages in cpu-small.
struct WeightCopy::Layouts {
  struct Key {
    i64 offset, K, N;
    bool tb;
    bool operator==(const Key& o) const {
      return std::tie(offset, K, N, tb) == std::tie(o.offset, o.K, o.N, o.tb);
    }
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      return std::hash<i64>()(k.offset * 2 + k.tb) ^ (std::hash<i64>()(k.K * 65599 + k.N) << 1);
    }
  };
  struct Blocked {
    dnnl::memory memory;
    uint64_t refresh;  // the refresh whose weights it holds
  };
  std::mutex mutex;
  std::unordered_map<Key, Blocked, Hash> blocked;
};

WeightCopy::WeightCopy(const float* data, i64 n)
    : data_(data), n_(n), layouts_(std::make_unique<Layouts>()) {
  std::unique_lock lock(g_mutex);
  g_copies.push_back(this);
}

WeightCopy::~WeightCopy() {
  std::unique_lock lock(g_mutex);
  g_copies.erase(std::find(g_copies.begin(), g_copies.end(), this));
}

void WeightCopy::switch_to(Dtype d) {
  // A copy of another dtype is freed: a model holds one copy, not one per dtype it has run in.
  if (d != Dtype::bf16) {
    std::vector<uint16_t>().swap(bf16_);
    std::lock_guard guard(layouts_->mutex);
    layouts_->blocked.clear();
  }
  if (d != Dtype::bf16_emulated) std::vector<float>().swap(rounded_);
  if (d == Dtype::bf16_emulated) rounded_.resize(size_t(n_));
  plain_fresh_ = false;  // bf16: sized when first made (refresh_for_decoding, a range refresh)
  dtype_ = d;
}

void WeightCopy::convert(i64 begin, i64 end) {
  if (dtype_ == Dtype::bf16) {
    if (bf16_.size() != size_t(n_)) bf16_.resize(size_t(n_));
    to_bf16(data_ + begin, bf16_.data() + begin, end - begin);
  }
  if (dtype_ == Dtype::bf16_emulated)
    round_to_bf16(data_ + begin, rounded_.data() + begin, end - begin);
}

void WeightCopy::refresh_all(bool plain) {
  std::unique_lock lock(g_mutex);  // no product reads a copy while it changes
  switch_to(compute_dtype());
  ++refreshes_;  // every blocked layout is stale
  if (dtype_ != Dtype::bf16 || plain) convert(0, n_);
  plain_fresh_ = dtype_ == Dtype::bf16 && plain;
}

void WeightCopy::refresh() {
  refresh_all(false);
}

void WeightCopy::refresh_for_decoding() {
  refresh_all(true);
}

void WeightCopy::refresh(i64 begin, i64 end) {
  std::unique_lock lock(g_mutex);
  const Dtype d = compute_dtype();
  if (d != dtype_) switch_to(d);
  // A plain copy left stale by refresh() is made whole first (then kept fresh range by range).
  if (d == Dtype::bf16 && !plain_fresh_)
    convert(0, n_);
  else
    convert(begin, end);
  if (d == Dtype::bf16) plain_fresh_ = true;
  // The blocked layouts of the weights in the run are stale; the others stay current.
  std::lock_guard guard(layouts_->mutex);
  for (auto& [key, blocked] : layouts_->blocked)
    if (key.offset >= begin && key.offset < end) blocked.refresh = UINT64_MAX;
}

i64 WeightCopy::bytes() const {
  std::lock_guard guard(layouts_->mutex);
  i64 b = i64(bf16_.capacity() * sizeof(uint16_t) + rounded_.capacity() * sizeof(float));
  for (const auto& [key, blocked] : layouts_->blocked)
    b += i64(blocked.memory.get_desc().get_size());
  return b;
}

namespace cpu {

const WeightCopy* WeightCopies::holder(const float* p, int64_t extent, Dtype d) {
  for (const WeightCopy* c : g_copies)
    if (c->dtype_ == d && d != Dtype::fp32 && p >= c->data_ && p + extent <= c->data_ + c->n_)
      return c;
  return nullptr;
}

const void* WeightCopies::find(const float* p, int64_t extent, Dtype d) {
  std::shared_lock lock(g_mutex);
  const WeightCopy* c = holder(p, extent, d);
  if (!c) return nullptr;
  if (d == Dtype::bf16 && !c->plain_fresh_) return nullptr;  // refresh(): no plain copy
  const i64 at = p - c->data_;
  return d == Dtype::bf16 ? static_cast<const void*>(c->bf16_.data() + at)
                          : static_cast<const void*>(c->rounded_.data() + at);
}

bool WeightCopies::covers(const float* p, int64_t extent, Dtype d) {
  std::shared_lock lock(g_mutex);
  return holder(p, extent, d) != nullptr;
}

dnnl::memory WeightCopies::blocked(const float* p, bool tb, int64_t K, int64_t N, int64_t ldb,
                                   const dnnl::memory::desc& want, const dnnl::engine& engine,
                                   dnnl::stream& stream) {
  std::shared_lock lock(g_mutex);
  const int64_t rows = tb ? N : K, cols = tb ? K : N;
  const WeightCopy* c = holder(p, (rows - 1) * ldb + cols, Dtype::bf16);
  if (!c) return {};
  WeightCopy::Layouts& l = *c->layouts_;
  const WeightCopy::Layouts::Key key{p - c->data_, K, N, tb};
  std::lock_guard guard(l.mutex);
  auto it = l.blocked.find(key);
  const bool kept = it != l.blocked.end() && it->second.memory.get_desc() == want;
  if (kept && it->second.refresh == c->refreshes_) return it->second.memory;
  dnnl::memory to = kept ? it->second.memory : dnnl::memory(want, engine);  // oneDNN owns it
  // The source: the plain copy where one is current (made since the refresh: the layouts then
  // hold the same values as it), else this weight converted now from the buffer, with the same
  // rounding (a training step never makes the plain copy: refresh_for_decoding does).
  const uint16_t* source = nullptr;
  int64_t ld = ldb;
  if (c->plain_fresh_) {
    source = c->bf16_.data() + key.offset;
  } else {
    thread_local std::vector<uint16_t> converted;
    if (converted.size() < size_t(rows * cols)) converted.resize(size_t(rows * cols));
    to_bf16_rows(p, rows, cols, ldb, converted.data());
    source = converted.data(), ld = cols;
  }
  using dims = dnnl::memory::dims;
  const dnnl::memory::desc plain({K, N}, dnnl::memory::data_type::bf16,
                                 tb ? dims{1, ld} : dims{ld, 1});
  dnnl::memory from(plain, engine, const_cast<uint16_t*>(source));
  dnnl::reorder(from, to).execute(stream, from, to);
  stream.wait();
  l.blocked[key] = {to, c->refreshes_};
  return to;
}

}  // namespace cpu

}  // namespace marin::kernels
