// Buffer<T>: large buffers are fresh zero pages, 2 MiB-aligned and advised as transparent huge
// pages from 2 MiB on (core/buffer.hpp), released exactly (no mapping left behind).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "core/buffer.hpp"

namespace {

// The VmFlags line of the /proc/self/smaps entry that contains address `p` ("" if none).
std::string vm_flags_of(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= a && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

// The process's mapped address space in KiB (VmSize): a mapping left behind grows it, whether
// or not the kernel merges it with a neighbour.
size_t mapped_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stoul(line.substr(7));
  return 0;
}

}  // namespace

TEST(Buffer, LargeBuffersAreZeroAlignedToHugePagesAndAdvised) {
  constexpr size_t kHuge = size_t(2) << 20;
  for (size_t mib : {2, 3, 10, 65}) {
    marin::Buffer<float> b(mib * (size_t(1) << 20) / sizeof(float) + 7);  // not a page multiple
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kHuge, 0u) << mib;
    EXPECT_EQ(b[0], 0.0f);
    EXPECT_EQ(b[b.size() - 1], 0.0f);
    b[0] = 1, b[b.size() - 1] = 2;  // both ends are mapped
    EXPECT_NE(vm_flags_of(b.data()).find(" hg"), std::string::npos)
        << mib << " MiB: " << vm_flags_of(b.data());
  }
  // From 1 MiB to 2 MiB: plain pages without the advice.
  marin::Buffer<char> mid(size_t(3) << 19);  // 1.5 MiB
  EXPECT_EQ(vm_flags_of(mid.data()).find(" hg"), std::string::npos) << vm_flags_of(mid.data());
}

TEST(Buffer, ResizingReleasesEveryMappingAndZeroes) {
  auto churn = [](int n) {
    for (int i = 0; i < n; ++i) {
      marin::Buffer<double> b(size_t(1) << (18 + i % 6));  // 2 MiB … 64 MiB
      b[b.size() / 2] = 1;
      b.resize(b.size() + 4097);
      EXPECT_EQ(b[b.size() / 2], 0.0);
    }
  };
  churn(12);  // the allocator's (or a sanitizer's) own mappings settle first
  const size_t before = mapped_kib();
  churn(200);
  // A buffer that left its head or tail slack mapped (up to 2 MiB each) would add ~200 MiB here,
  // one never unmapped 2–64 MiB; the allocator's own growth stays far below 32 MiB.
  EXPECT_LE(mapped_kib(), before + 32 * 1024);
}
