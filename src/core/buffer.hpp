#pragma once
// An owned, 64-byte aligned, zero-initialised array. Everything large in the project (parameters,
// gradients, activations, workspaces) lives in one of these and is sized once, outside the step.
// Large buffers are fresh anonymous pages from the kernel, zero already and mapped on first touch:
// memory a process sizes but never uses (a decoder's full-sequence activations) costs no RAM.
// From 2 MiB on they are 2 MiB-aligned and advised as transparent huge pages (MADV_HUGEPAGE, for
// kernels whose THP mode is "madvise"): the first touch of a training step's ~2 GB then takes one
// fault per 2 MiB instead of one per 4 KiB (seconds of system time at start-up), and the
// products see fewer TLB misses. Untouched parts still cost nothing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

#include <sys/mman.h>

#include "core/limits.hpp"

namespace marin {

template <class T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n) { resize(n); }
  // Copies write every element once (no zeroing first).
  Buffer(const Buffer& o) {
    reallocate(o.n_);
    if (n_) std::memcpy(p_, o.p_, n_ * sizeof(T));
  }
  Buffer& operator=(const Buffer& o) {
    if (this != &o) {
      reallocate(o.n_);
      if (n_) std::memcpy(p_, o.p_, n_ * sizeof(T));
    }
    return *this;
  }
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~Buffer() { release(); }

  // Reallocates only when the size changes; contents are zeroed.
  void resize(size_t n) {
    if (!reallocate(n)) zero();
  }
  void zero() {
    if (n_) std::memset(static_cast<void*>(p_), 0, n_ * sizeof(T));
  }

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  // Gives the whole pages inside elements [begin, end) back to the kernel: their memory stops
  // counting and they read as zeros until written again. The partial pages at either end, and a
  // small buffer (from the heap), keep their contents. Fully sharded parameters (--shard-params)
  // let go this way of the runs of the table that other ranks hold.
  void release_pages(size_t begin, size_t end) {
    if (bytes_of(n_) < kMappedBytes || begin >= end) return;
    const uintptr_t b = (reinterpret_cast<uintptr_t>(p_ + begin) + kPage - 1) / kPage * kPage;
    const uintptr_t e = reinterpret_cast<uintptr_t>(p_ + end) / kPage * kPage;
    if (b < e) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  }

  // release_pages of [begin, end) but for the elements [keep_begin, keep_end) (their pages stay).
  void release_pages_except(size_t begin, size_t end, size_t keep_begin, size_t keep_end) {
    release_pages(begin, std::min(end, std::max(begin, keep_begin)));
    release_pages(std::max(begin, std::min(end, keep_end)), end);
  }

  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  std::span<T> span() { return {p_, n_}; }
  std::span<const T> span() const { return {p_, n_}; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  const T* begin() const { return p_; }
  const T* end() const { return p_ + n_; }

 private:
  // From this size on, whole pages of the kernel's (zeroed, lazily mapped) instead of the heap.
  static constexpr size_t kMappedBytes = size_t(1) << 20;
  static size_t bytes_of(size_t n) { return (n * sizeof(T) + 63) / 64 * 64; }
  static constexpr size_t kPage = 4096, kHugePage = size_t(2) << 20;
  static size_t mapped_bytes(size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

  // `bytes` (a multiple of the page) of fresh zero pages; from 2 MiB on, at a 2 MiB boundary (a
  // larger mapping trimmed at both ends) and advised as huge pages.
  static void* map_pages(size_t bytes) {
    const int prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS;
    if (bytes < kHugePage) {
      void* m = mmap(nullptr, bytes, prot, flags, -1, 0);
      if (m == MAP_FAILED) throw std::bad_alloc();
      return m;
    }
    const size_t span = bytes + kHugePage;
    void* m = mmap(nullptr, span, prot, flags, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    char* const first = static_cast<char*>(m);
    char* const at =
        first + (kHugePage - reinterpret_cast<uintptr_t>(first) % kHugePage) % kHugePage;
    if (at > first) munmap(first, size_t(at - first));
    if (first + span > at + bytes) munmap(at + bytes, size_t(first + span - (at + bytes)));
    madvise(at, bytes, MADV_HUGEPAGE);  // advice only: a kernel without THP ignores or refuses it
    return at;
  }

  void release() {
    if (!p_) return;
    if (bytes_of(n_) >= kMappedBytes)
      munmap(static_cast<void*>(p_), mapped_bytes(bytes_of(n_)));
    else
      std::free(p_);
    p_ = nullptr;
    n_ = 0;
  }

  // Storage for n elements, reallocated only when the size changes; returns true when it is
  // fresh pages of the kernel's (known zero), false when the contents are undefined.
  bool reallocate(size_t n) {
    if (n == n_) return false;
    release();  // empty, not half-made, when a check below throws
    if (!n) return false;
    // Refused before it is attempted (limits.hpp): not a wrapped size, not more than the machine
    // has. Sized-from-config callers check first with a message of their own.
    if (n > (size_t(INT64_MAX) - 63) / sizeof(T))
      fail("a buffer of {} elements of {} bytes overflows a 64-bit size", n, sizeof(T));
    require_memory(int64_t(n * sizeof(T)), fmt::format("a buffer of {} elements", n));
    const size_t bytes = bytes_of(n);
    if (bytes >= kMappedBytes) {
      p_ = static_cast<T*>(map_pages(mapped_bytes(bytes)));
      n_ = n;
      return true;
    }
    p_ = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (!p_) throw std::bad_alloc();
    n_ = n;
    return false;
  }

  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace marin
