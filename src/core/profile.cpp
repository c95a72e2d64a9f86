// The per-op profile (see profile.hpp).
#include "core/profile.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>

namespace marin::profile {

namespace {

using Clock = std::chrono::steady_clock;

struct Totals {
  double seconds = 0;
  std::atomic<double> flops{0};
  int64_t calls = 0;
};

std::atomic<bool> on{false};
std::mutex mu;  // guards `totals` (a new name) and enable()
std::map<std::string, Totals>* totals = new std::map<std::string, Totals>;  // never freed
std::atomic<Totals*> current{nullptr};  // the innermost open scope's totals

}  // namespace

struct Scope::Open {
  Totals* totals;
  Totals* outer;
  Open* parent;
  Clock::time_point start;
  double inner_seconds = 0;  // time of the scopes opened inside this one
};

namespace {
thread_local Scope::Open* innermost = nullptr;  // this thread's open scopes, as a stack
}

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
  Totals* t;
  {
    std::lock_guard<std::mutex> lock(mu);
    t = &(*totals)[name];  // std::map: the address stays while other names are added
  }
  open_ = new Open{t, current.load(), innermost, Clock::now()};
  innermost = open_;
  current.store(t);
}

Scope::~Scope() {
  if (!open_) return;
  const double s = std::chrono::duration<double>(Clock::now() - open_->start).count();
  open_->totals->seconds += s - open_->inner_seconds;
  ++open_->totals->calls;
  if (open_->parent) open_->parent->inner_seconds += s;
  innermost = open_->parent;
  current.store(open_->outer);
  delete open_;
}

}  // namespace marin::profile
