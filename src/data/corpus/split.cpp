// The stable train/validation split and the xxh64 hashes of the manifest.
#include <unistd.h>
#include <xxhash.h>

#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
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
  return hex64(XXH64_digest(st.get()));
}

ShardChecksums::ShardChecksums(const std::filesystem::path& root, bool verify)
    : root_(root), manifest_(root / "manifest.json") {
  if (!verify || !std::filesystem::exists(manifest_)) return;
  const std::string where = manifest_.string();
  const nlohmann::json m = load_json(where);
  if (!m.is_object() || !m.contains("domains")) return;
  if (!m["domains"].is_object()) fail("{}: 'domains' must be an object", where);
  for (const auto& [name, dom] : m["domains"].items()) {
    if (!dom.is_object() || !dom.contains("shards")) continue;
    if (!dom["shards"].is_array()) fail("{}: domains.{}.shards must be a list", where, name);
    for (const auto& s : dom["shards"]) {
      if (!s.is_object() || !s.contains("file") || !s["file"].is_string())
        fail("{}: every shard of domain '{}' needs a string 'file'", where, name);
      const std::string file = s["file"].get<std::string>();
      check_manifest_path(file, where);
      const std::string key = std::filesystem::path(file).lexically_normal().string();
      if (xxh64_.count(key)) fail("{}: shard '{}' is listed twice", where, file);
      std::string hex;
      if (s.contains("xxh64")) {
        if (!s["xxh64"].is_string()) fail("{}: shard '{}': xxh64 must be a string", where, file);
        hex = s["xxh64"].get<std::string>();
        if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
          fail("{}: shard '{}': xxh64 '{}' is not 16 lowercase hex digits", where, file, hex);
      }
      xxh64_[key] = hex;
    }
  }
}

void ShardChecksums::check(const std::filesystem::path& file, std::string_view bytes) const {
  if (xxh64_.empty()) return;
  const std::string key = std::filesystem::relative(file, root_).lexically_normal().string();
  const auto it = xxh64_.find(key);
  if (it == xxh64_.end() || it->second.empty()) return;
  const std::string got = hex64(xxh64(bytes));
  if (got != it->second)
    fail(
        "{}: xxh64 {} does not match {} in {}: the shard was changed after the corpus was built "
        "(rebuild it, or pass --no-verify to read it anyway)",
        file.string(), got, it->second, manifest_.string());
}

}  // namespace marin::corpus
