#include "data/token_rows.hpp"

#include <fmt/format.h>

#include <xxhash.h>

#include <cstring>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/limits.hpp"

namespace marin {

TokenRows TokenRows::load(const std::string& path, int64_t seq_len, int64_t vocab_size) {
  const int64_t row_bytes =
      checked("the row size of a token file", fmt::format("seq_len = {}", seq_len),
              [&] { return 4 * (Checked(seq_len) + 1); });
  if (seq_len <= 0) fail("{}: seq_len must be positive to read rows, got {}", path, seq_len);
  const std::string bytes = read_file(path);
  if (bytes.empty())
    fail("{}: empty token file (expected rows of {} uint32 ids)", path, seq_len + 1);
  if (int64_t(bytes.size()) % row_bytes != 0)
    fail(
        "{}: size {} bytes is not a multiple of (seq_len + 1) × 4 = {} (seq_len {}): not rows of "
        "this model's length, or truncated",
        path, bytes.size(), row_bytes, seq_len);
  TokenRows r;
  r.path = path;
  r.seq_len = seq_len;
  r.rows = int64_t(bytes.size()) / row_bytes;
  r.bytes = int64_t(bytes.size());
  r.xxh64 = XXH64(bytes.data(), bytes.size(), 0);
  r.ids.resize(bytes.size() / 4);
  std::memcpy(r.ids.data(), bytes.data(), bytes.size());  // little-endian host
  for (size_t i = 0; i < r.ids.size(); ++i)
    if (r.ids[i] >= uint64_t(vocab_size))
      fail("{}: token id {} at row {}, position {} is not below the vocabulary size {}", path,
           r.ids[i], i / (seq_len + 1), i % (seq_len + 1), vocab_size);
  return r;
}

void TokenRows::fill(int64_t first, int n, int32_t* tokens, int32_t* labels) const {
  const int64_t S = seq_len;
  // A negative start would index before the buffer (the modulo keeps its sign).
  MARIN_CHECK(first >= 0 && first < rows, "{}: row {} is out of range [0, {})", path, first, rows);
  for (int b = 0; b < n; ++b) {
    const uint32_t* row = ids.data() + ((first + b) % rows) * (S + 1);
    for (int64_t t = 0; t < S; ++t) {
      tokens[b * S + t] = int32_t(row[t]);
      labels[b * S + t] = int32_t(row[t + 1]);
    }
  }
}

}  // namespace marin
