// The machine's memory as the ceiling of allocations sized from a configuration (limits.hpp).
#include "core/limits.hpp"

#include <sys/resource.h>
#include <unistd.h>

namespace marin {

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t(u.ru_maxrss) * 1024;  // Linux counts it in KiB
}

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return INT64_MAX;  // unknown: nothing is refused
  int64_t bytes;
  if (__builtin_mul_overflow(int64_t(pages), int64_t(page), &bytes)) return INT64_MAX;
  return bytes;
}

void require_memory(int64_t bytes, std::string_view what) {
  const int64_t have = physical_memory_bytes();
  if (bytes > have)
    fail("{} needs {} bytes ({:.2f} GiB) but this machine has {} bytes ({:.2f} GiB) of memory",
         what, bytes, double(bytes) / (1 << 30), have, double(have) / (1 << 30));
}

}  // namespace marin
