#pragma once
// The per-op profile of `marin bench --train --profile` (docs/benchmarks.md, "Per-op profile"):
// where a training step's time goes, op by op, with the FLOPs of the products each op ran.
//
//   { profile::Scope s("attention.forward"); ... }   // times the op (self time: nested scopes
//                                                     // are their own rows)
//   profile::add_flops(2.0 * M * N * K);              // a kernel's products, charged to the op
//                                                     // open at the time (on any thread)
//
// Off (the default), a Scope is one relaxed atomic load and add_flops another: nothing is timed
// or summed. Scopes open and close on the thread that runs the step (the ops' own threads work
// inside them); FLOPs may be added from any thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace marin::profile {

struct Row {
  std::string name;
  double seconds = 0;  // self time: time in this op less the time of scopes opened inside it
  double flops = 0;    // products charged to it (GEMMs, symmetric products, attention)
  int64_t calls = 0;
};

void enable(bool on);  // also clears what was collected
bool enabled();
// The rows collected since enable(true), slowest first.
std::vector<Row> rows();

void add_flops(double flops);

class Scope {
 public:
  explicit Scope(const char* name);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  struct Totals* totals_ = nullptr;  // null: profiling was off when it opened
  Scope* parent_ = nullptr;          // the scope open around it on this thread
  std::chrono::steady_clock::time_point start_;
  double inner_seconds_ = 0;  // time of the scopes opened inside this one
};

}  // namespace marin::profile
