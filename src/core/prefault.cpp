#include "core/prefault.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace marin {

Prefault::~Prefault() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void Prefault::add(void* p, size_t bytes) {
  if (p && bytes) ranges_.push_back({static_cast<char*>(p), bytes});
}

void Prefault::start() {
  if (ranges_.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] {
    // Whole pages only (the advice wants an aligned start), in pieces, so a stop (the run
    // ending early) waits for one piece at most.
    const uintptr_t kPage = uintptr_t(sysconf(_SC_PAGESIZE)), kPiece = uintptr_t(32) << 20;
    for (const Range& r : ranges_) {
      const uintptr_t b = (reinterpret_cast<uintptr_t>(r.p) + kPage - 1) / kPage * kPage;
      const uintptr_t e = (reinterpret_cast<uintptr_t>(r.p) + r.bytes) / kPage * kPage;
      for (uintptr_t at = b; at < e && !stop_; at += kPiece) {
        if (madvise(reinterpret_cast<void*>(at), std::min<uintptr_t>(kPiece, e - at),
                    MADV_POPULATE_WRITE) == 0)
          continue;
        if (errno == EINVAL) return;  // a kernel without the advice: the first touch does it
        break;  // this range: unmapped since, or no memory now (the owner's touch will tell)
      }
    }
  });
}

}  // namespace marin
