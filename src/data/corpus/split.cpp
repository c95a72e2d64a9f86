// The stable train/validation split and the xxh64 hashes of the manifest.
#include <unistd.h>
#include <xxhash.h>

#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "data/corpus/corpus.hpp"
#include "data/shards.hpp"

namespace marin::corpus {

std::uint64_t xxh64(std::string_view data, std::uint64_t seed) {
  return XXH64(data.data(), data.size(), seed);
}

bool is_valid_split(std::string_view id, double valid_fraction) {
  // The top 53 bits of the hash as a fraction in [0, 1).
  const double u = static_cast<double>(xxh64(id, 0) >> 11) * 0x1.0p-53;
  return u < valid_fraction;
}

std::string xxh64_file_hex(const std::filesystem::path& file) {
  const int fd = open_input(file.string());  // refuses a FIFO or directory without blocking
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(::fdopen(fd, "rb"), &std::fclose);
  if (!f) {
    ::close(fd);
    fail("corpus: cannot open {} to hash it", file.string());
  }
  std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> st(XXH64_createState(),
                                                                       &XXH64_freeState);
  XXH64_reset(st.get(), 0);
  std::vector<char> buf(1 << 20);
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0)
    XXH64_update(st.get(), buf.data(), n);
  if (std::ferror(f.get())) fail("corpus: read error on {}", file.string());
  return fmt::format("{:016x}", XXH64_digest(st.get()));
}

}  // namespace marin::corpus
