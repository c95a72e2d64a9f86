#pragma once
// An owned, 64-byte aligned, zero-initialised array. Everything large in the project (parameters,
// gradients, activations, workspaces) lives in one of these and is sized once, outside the step.
// Large buffers are fresh anonymous pages from the kernel, zero already and mapped on first touch:
// memory a process sizes but never uses (a decoder's full-sequence activations) costs no RAM.
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

  void release() {
    if (!p_) return;
    if (bytes_of(n_) >= kMappedBytes)
      munmap(static_cast<void*>(p_), bytes_of(n_));
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
      void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) throw std::bad_alloc();
      p_ = static_cast<T*>(m);
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
