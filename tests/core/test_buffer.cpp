// Buffer<T>: large buffers are fresh zero pages, 2 MiB-aligned and advised as transparent huge
// pages from 2 MiB on (core/buffer.hpp), released exactly (no mapping left behind); a Prefault
// populates them in the background without changing a value (core/prefault.hpp); a file's hash
// read a piece at a time is the hash of its bytes (core/fileio.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/prefault.hpp"

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

// How many of the pages of [p, p + bytes) (p page-aligned) are resident.
size_t resident_pages(const void* p, size_t bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), pages = (bytes + page - 1) / page;
  std::vector<unsigned char> in(pages);
  EXPECT_EQ(mincore(const_cast<void*>(p), bytes, in.data()), 0);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
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

// release_pages (--shard-params gives back the runs of the table other ranks hold): the whole pages
// inside the range stop being resident and read as zeros; the partial pages at its ends, and the
// elements outside it, keep their values. release_pages_except keeps the pages of its hole too.
TEST(Buffer, ReleasedPagesReadZeroAndStopCountingTheRestKeepsItsValues) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), per_page = page / sizeof(float);
  marin::Buffer<float> b(320 * per_page);  // 1.25 MiB with 4 KiB pages: mapped, not the heap
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 1000) + 1;
  const auto resident = [&](size_t first_page, size_t pages) {
    std::vector<unsigned char> in(pages);
    EXPECT_EQ(mincore(b.data() + first_page * per_page, pages * page, in.data()), 0);
    size_t n = 0;
    for (unsigned char c : in) n += c & 1;
    return n;
  };
  ASSERT_EQ(resident(0, 320), 320u);
  const size_t begin = 3 * per_page + 5, end = 40 * per_page + 7;  // pages 4 … 39 whole
  b.release_pages(begin, end);
  EXPECT_EQ(resident(4, 36), 0u);
  EXPECT_EQ(resident(0, 4), 4u);
  EXPECT_EQ(resident(40, 280), 280u);
  for (size_t i = 0; i < b.size(); ++i) {
    const bool released = i >= 4 * per_page && i < 40 * per_page;
    ASSERT_EQ(b[i], released ? 0.0f : float(i % 1000) + 1) << i;
  }
  // Pages 41 … 63 but for elements inside pages 50 and 51 (both kept, as partial pages).
  b.release_pages_except(41 * per_page, 64 * per_page, 50 * per_page + 3, 51 * per_page + 9);
  EXPECT_EQ(resident(41, 9), 0u);
  EXPECT_EQ(resident(50, 2), 2u);
  EXPECT_EQ(resident(52, 12), 0u);
  EXPECT_EQ(resident(64, 256), 256u);
  EXPECT_EQ(b[50 * per_page], float((50 * per_page) % 1000) + 1);
  b[45 * per_page] = 7;  // a released page is mapped again by a write
  EXPECT_EQ(resident(45, 1), 1u);
  EXPECT_EQ(b[45 * per_page], 7.0f);
}

// A Prefault faults a buffer's pages in on its own thread (where the kernel has
// MADV_POPULATE_WRITE, 5.14+; elsewhere it does nothing, which the test then accepts), and
// values written meanwhile by the owner stay as written: the advice does not write.
TEST(Prefault, PopulatesInTheBackgroundAndKeepsWhatTheOwnerWrites) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), n = (size_t(24) << 20) / sizeof(float);
  marin::Buffer<float> b(n), untouched(n);
  const size_t pages = n * sizeof(float) / page;
  ASSERT_EQ(resident_pages(b.data(), n * sizeof(float)), 0u);
  {
    marin::Prefault pf;
    pf.add(b.data(), n * sizeof(float));
    pf.start();
    for (size_t i = 0; i < n; i += 4099) b[i] = float(i) + 0.5f;  // the owner, meanwhile
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (resident_pages(b.data(), n * sizeof(float)) < pages &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Where the kernel has the advice, every page is in; where it refuses it (EINVAL), the values
  // below are all there is to check.
  if (madvise(untouched.data(), 0, MADV_POPULATE_WRITE) == 0) {
    EXPECT_EQ(resident_pages(b.data(), n * sizeof(float)), pages);
  }
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], i % 4099 == 0 ? float(i) + 0.5f : 0.0f) << i;
  EXPECT_EQ(resident_pages(untouched.data(), n * sizeof(float)), 0u) << "a buffer not added";
}

TEST(FileHash, APieceAtATimeIsTheHashOfTheBytes) {
  const std::string path = ::testing::TempDir() + "/marin-file-hash.bin";
  for (const size_t size :
       {size_t(0), size_t(1), size_t(1) << 20, (size_t(1) << 20) + 1, (size_t(3) << 20) + 12345}) {
    std::string bytes(size, '\0');
    for (size_t i = 0; i < size; ++i) bytes[i] = char((i * 2654435761u) >> 13);
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(size));
    EXPECT_EQ(marin::xxh64_file_hex(path), marin::xxh64_hex(bytes)) << size;
    EXPECT_EQ(marin::read_file(path), bytes) << size;
  }
  std::remove(path.c_str());
  EXPECT_THROW(marin::xxh64_file_hex(path), marin::Error);
}
