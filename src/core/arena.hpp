#pragma once
// A stack allocator over one buffer, sized once per model: backward passes take scratch from it
// with take() and give it back by restoring a mark, so nothing is allocated inside a step.
#include <cstddef>

#include "core/buffer.hpp"
#include "core/error.hpp"

namespace marin {

template <class T>
class Arena {
 public:
  void reserve(size_t n) {
    buf_.resize(n);
    used_ = 0;
  }
  // n elements, 64-byte aligned, uninitialised (callers overwrite or zero what they need).
  T* take(size_t n) {
    size_t start = (used_ + 15) / 16 * 16;
    if (start + n > buf_.size())
      fail("internal: workspace arena exhausted ({} + {} > {} elements)", start, n, buf_.size());
    used_ = start + n;
    return buf_.data() + start;
  }
  T* take_zeroed(size_t n) {
    T* p = take(n);
    for (size_t i = 0; i < n; ++i) p[i] = T(0);
    return p;
  }
  size_t mark() const { return used_; }
  void release(size_t m) { used_ = m; }
  size_t capacity() const { return buf_.size(); }

 private:
  Buffer<T> buf_;
  size_t used_ = 0;
};

// Restores the arena to where it was when the scope began.
template <class T>
class ArenaScope {
 public:
  explicit ArenaScope(Arena<T>& a) : a_(a), m_(a.mark()) {}
  ~ArenaScope() { a_.release(m_); }
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  Arena<T>& a_;
  size_t m_;
};

}  // namespace marin
