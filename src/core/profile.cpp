// The per-op profile (see profile.hpp).
#include "core/profile.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

namespace marin::profile {

// An op's sums (declared in profile.hpp, where a Scope points at its op's).
struct Totals {
  double seconds = 0;
  std::atomic<double> flops{0};
  int64_t calls = 0;
};

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> on{false};
std::mutex mu;  // guards `totals` (a new name) and enable()
std::map<std::string, Totals>* totals = new std::map<std::string, Totals>;  // never freed
std::atomic<Totals*> current{nullptr};    // the innermost open scope's totals, for any thread
thread_local Scope* innermost = nullptr;  // this thread's open scopes, as a stack

}  // namespace

void enable(bool v) {
  std::lock_guard<std::mutex> lock(mu);
  totals->clear();
  current.store(nullptr);
  on.store(v, std::memory_order_relaxed);
}

bool enabled() {
  return on.load(std::memory_order_relaxed);
}

std::vector<Row> rows() {
  std::lock_guard<std::mutex> lock(mu);
  std::vector<Row> out;
  for (const auto& [name, t] : *totals) out.push_back({name, t.seconds, t.flops.load(), t.calls});
  std::sort(out.begin(), out.end(),
            [](const Row& a, const Row& b) { return a.seconds > b.seconds; });
  return out;
}

void add_flops(double flops) {
  if (!enabled()) return;
  if (Totals* t = current.load(std::memory_order_relaxed)) t->flops.fetch_add(flops);
}

Scope::Scope(const char* name) {
  if (!enabled()) return;
  {
    std::lock_guard<std::mutex> lock(mu);
    totals_ = &(*totals)[name];  // std::map: the address stays while other names are added
  }
  parent_ = innermost;
  innermost = this;
  current.store(totals_);
  start_ = Clock::now();
}

Scope::~Scope() {
  if (!totals_) return;
  const double s = std::chrono::duration<double>(Clock::now() - start_).count();
  totals_->seconds += s - inner_seconds_;
  ++totals_->calls;
  if (parent_) parent_->inner_seconds_ += s;
  innermost = parent_;
  current.store(parent_ ? parent_->totals_ : nullptr);
}

}  // namespace marin::profile
