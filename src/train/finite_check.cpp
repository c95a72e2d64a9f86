#include "train/finite_check.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "core/error.hpp"
#include "kernels/kernels.hpp"

namespace marin {

// kernels::max_abs is infinite exactly when x holds a NaN or Inf (SIMD, split over the compute
// threads). Three reads of the model's state a step (parameters, m, v).
bool any_nonfinite(const float* x, int64_t n) {
  return std::isinf(kernels::max_abs(x, n));
}

int64_t first_nonfinite_tensor(const ParamTable& table, const float* x, parallel::Range range,
                               int64_t base) {
  const auto& ps = table.params();
  for (size_t i = 0; i < ps.size(); ++i) {
    const ParamInfo& p = ps[i];
    if (p.offset < range.begin || p.offset >= range.end) continue;
    if (any_nonfinite(x + (p.offset - base), p.size)) return int64_t(i);
  }
  return -1;
}

void require_finite_tensor(const std::string& name, const float* x, int64_t n,
                           const std::string& what, bool allow) {
  int64_t bad = 0;
  for (int64_t k = 0; k < n; ++k) bad += !std::isfinite(x[k]);
  if (bad == 0) return;
  const std::string msg =
      fmt::format("{}: tensor '{}' holds {} non-finite value{} (NaN or Inf) of {}", what, name, bad,
                  bad > 1 ? "s" : "", n);
  if (!allow) fail("{} (--allow-nonfinite loads it anyway, for forensics)", msg);
  fmt::print(stderr, "marin: warning: {}\n", msg);
}

void require_finite_params(const ParamTable& table, const float* params, const std::string& what,
                           bool allow) {
  for (const ParamInfo& p : table.params())
    require_finite_tensor(p.name, params + p.offset, p.size, what, allow);
}

namespace {

// f(p, i, c) for each piece of the values [at, at + n) of the sequence `stores`: c values at p,
// the i-th of the n onward.
template <class Span, class F>
void for_each_piece(const std::vector<Span>& stores, int64_t at, int64_t n, F f) {
  int64_t done = 0;
  for (const Span& s : stores) {
    if (done == n) break;
    const int64_t size = int64_t(s.size());
    if (at >= size) {
      at -= size;
      continue;
    }
    const int64_t c = std::min(n - done, size - at);
    f(s.data() + at, done, c);
    done += c, at = 0;
  }
  MARIN_CHECK(done == n, "UpdateGuard: the copy is larger than its storage");
}

}  // namespace

void UpdateGuard::put(int64_t at, const float* x, int64_t n) {
  std::vector<std::span<float>> stores = lent_;
  stores.emplace_back(own_.data(), own_.size());
  for_each_piece(stores, at, n,
                 [&](float* p, int64_t i, int64_t c) { kernels::copy(x + i, p, c); });
}

void UpdateGuard::get(int64_t at, float* x, int64_t n) const {
  std::vector<std::span<const float>> stores(lent_.begin(), lent_.end());
  stores.emplace_back(own_.data(), own_.size());
  for_each_piece(stores, at, n,
                 [&](const float* p, int64_t i, int64_t c) { kernels::copy(p, x + i, c); });
}

void UpdateGuard::save(const Buffer<float>& params, const Buffer<float>& m, const Buffer<float>& v,
                       std::vector<parallel::Range> kept) {
  if (kept.empty()) kept = {{0, int64_t(params.size())}};
  int64_t n = int64_t(m.size() + v.size()), lent = 0;
  for (const parallel::Range& r : kept) n += r.size();
  for (const std::span<float>& s : lent_) lent += int64_t(s.size());
  // Sized at the first save, then reused (a threaded copy of up to 240 MB a cpu-small step).
  if (int64_t(own_.size()) != std::max<int64_t>(0, n - lent))
    own_.resize(size_t(std::max<int64_t>(0, n - lent)));
  kept_ = std::move(kept);
  m_size_ = int64_t(m.size()), v_size_ = int64_t(v.size());
  int64_t at = 0;
  for (const parallel::Range& r : kept_) put(at, params.data() + r.begin, r.size()), at += r.size();
  put(at, m.data(), m_size_);
  put(at + m_size_, v.data(), v_size_);
}

void UpdateGuard::restore(Buffer<float>& params, Buffer<float>& m, Buffer<float>& v) const {
  MARIN_CHECK(int64_t(m.size()) == m_size_ && int64_t(v.size()) == v_size_,
              "UpdateGuard::restore: buffers changed size since save");
  int64_t at = 0;
  for (const parallel::Range& r : kept_) get(at, params.data() + r.begin, r.size()), at += r.size();
  get(at, m.data(), m_size_);
  get(at + m_size_, v.data(), v_size_);
}

std::string UpdateGuard::check(const ParamTable& table, const float* params, const float* m,
                               const float* v, std::span<const Owned> own, parallel::Comm& comm) {
  // Encoded as 3·tensor + buffer so one Min all-reduce gives every rank the same, first, culprit.
  int64_t code = LLONG_MAX;
  const float* bufs[3] = {params, m, v};
  for (const Owned& o : own) {
    const int64_t shard_base = o.range.begin - o.state_at;  // m/v element of offset x: x − base
    const int64_t bases[3] = {0, shard_base, shard_base};
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t t = first_nonfinite_tensor(table, bufs[b], o.range, bases[b]);
      if (t >= 0) code = std::min(code, 3 * t + b);
    }
  }
  code = comm.allreduce(code, parallel::Op::Min);
  if (code == LLONG_MAX) return "";
  const std::string& name = table.params()[size_t(code / 3)].name;
  static const char* const kWhat[3] = {"parameter", "optimizer state m of", "optimizer state v of"};
  return fmt::format("{} '{}'", kWhat[code % 3], name);
}

}  // namespace marin
