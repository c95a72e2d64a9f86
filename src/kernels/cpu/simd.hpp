#pragma once
// Private helpers for the CPU kernels that do not depend on the instruction set: a per-thread
// scratch vector that grows but is never freed, so hot calls do not allocate. The per-target
// vector helpers (exp, sigmoid) live in simd-inl.hpp.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace marin::kernels::cpu {

// Scratch memory owned by the calling thread; `slot` picks one of a few independent buffers.
// Contents are unspecified on return.
template <class T>
inline T* scratch(int slot, size_t n) {
  thread_local std::vector<T> bufs[8];
  auto& b = bufs[slot];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// The logistic function as the scalar kernels compute it (router combine, head gate, GatedNorm).
template <class T>
inline T sigmoid(T z) {
  return T(1) / (T(1) + std::exp(-z));
}

// Below this many elements a kernel runs on the calling thread (OpenMP fork cost dominates).
inline constexpr long long kParallelMin = 1 << 15;

// body(i) for i in [0, n): on the compute threads (a static split) when `parallel`, else on the
// calling thread. Not `#pragma omp parallel for if (...)`: libgomp builds a team of one even
// for a false if-clause (measured 2 µs a region on a busy Zen 5), and a decoded token runs a
// few hundred small kernels. Iterations must be independent, so the split cannot change a result.
template <class F>
inline void parallel_for(long long n, bool parallel, F body) {
  if (!parallel || n < 2) {
    for (long long i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (long long i = 0; i < n; ++i) body(i);
}

// The block of for_blocks, and how many blocks n elements make.
inline constexpr long long kBlock = 4096;
inline constexpr long long blocks_of(long long n) {
  return (n + kBlock - 1) / kBlock;
}

// fn(begin, length) over blocks of an element-wise kernel's n elements, on the compute threads
// when n is large. Elements are independent, so the split cannot change a result.
template <class F>
inline void for_blocks(long long n, F fn) {
  parallel_for(blocks_of(n), n >= kParallelMin,
               [&](long long k) { fn(k * kBlock, std::min(kBlock, n - k * kBlock)); });
}

}  // namespace marin::kernels::cpu
