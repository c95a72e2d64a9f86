#pragma once
// Bounds on sizes (docs/reliability.md): 64-bit integer arithmetic that reports an overflow
// instead of wrapping to a negative number, and the machine's memory as the ceiling of any
// allocation sized from a configuration.
#include <cstdint>
#include <string_view>

#include "core/error.hpp"

namespace marin {

// What Checked throws on overflow. Code that knows which quantity it computes catches it (see
// checked()) and names the quantity and its inputs; uncaught it still reads as an overflow.
struct Overflow : Error {
  Overflow() : Error("64-bit integer overflow") {}
};

// An int64_t whose +, − and × fail with Overflow instead of wrapping (__builtin_*_overflow).
// Converts implicitly from integers, so a formula over Checked operands reads as it did.
class Checked {
 public:
  constexpr Checked(int64_t v = 0) : v_(v) {}  // NOLINT: implicit by design
  constexpr int64_t get() const { return v_; }

  friend Checked operator+(Checked a, Checked b) {
    int64_t r;
    if (__builtin_add_overflow(a.v_, b.v_, &r)) throw Overflow();
    return r;
  }
  friend Checked operator-(Checked a, Checked b) {
    int64_t r;
    if (__builtin_sub_overflow(a.v_, b.v_, &r)) throw Overflow();
    return r;
  }
  friend Checked operator*(Checked a, Checked b) {
    int64_t r;
    if (__builtin_mul_overflow(a.v_, b.v_, &r)) throw Overflow();
    return r;
  }
  Checked& operator+=(Checked b) { return *this = *this + b; }
  Checked& operator*=(Checked b) { return *this = *this * b; }
  friend bool operator==(Checked a, Checked b) { return a.v_ == b.v_; }
  friend auto operator<=>(Checked a, Checked b) { return a.v_ <=> b.v_; }

 private:
  int64_t v_;
};

// f() (a formula in Checked arithmetic) as an int64_t; an overflow becomes a marin::Error that
// names `what` and `inputs` (e.g. "num_layers = 4096, num_experts = 65536").
template <class F>
int64_t checked(std::string_view what, std::string_view inputs, F&& f) {
  try {
    return Checked(f()).get();
  } catch (const Overflow&) {
    fail("{} overflows a 64-bit integer ({}); reduce these sizes", what, inputs);
  }
}

// Physical memory of this machine in bytes (sysconf: pages × page size).
int64_t physical_memory_bytes();

// The most memory this process has held resident so far (getrusage's ru_maxrss), in bytes.
int64_t peak_rss_bytes();

// Refuses, before it is attempted, an allocation of `bytes` for `what` that exceeds the
// machine's physical memory: marin::Error with the bytes it would need and the bytes there are.
void require_memory(int64_t bytes, std::string_view what);

// Bounds shared by the command line and the run files (cli/options.hpp, train_option_table.cpp).
inline constexpr int64_t kMaxSteps = 1'000'000'000'000;  // steps, and periods counted in steps
inline constexpr int kMaxBatch = 1 << 24;                // sequences per step or forward pass
inline constexpr int kMaxThreads = 1024;                 // compute threads of a process
// Counts in input files, each far above any real use and low enough that the work they imply
// (a pairwise check, a per-entry allocation) stays bounded (docs/reliability.md, "Bounds").
inline constexpr size_t kMaxSafetensorsEntries = 250'000;  // tensors in one header
inline constexpr size_t kMaxMixtureSources = 10'000;       // domains/sources of one mixture
inline constexpr size_t kMaxLadderRuns = 1'000;  // runs of one ladder (rungs × budgets × seeds)
// The longest pre-tokenized piece (a "word") the tokenizer's BPE accepts: BPE of a piece costs
// about 40 bytes of memory per byte, and chunking a piece could change its ids.
inline constexpr size_t kMaxWordBytes = size_t(16) << 20;

}  // namespace marin
