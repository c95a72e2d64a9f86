#pragma once
// Pre-tokenized rows (formats.md): a raw little-endian uint32 file whose length is a multiple of
// seq_len + 1; each row is one document, inputs ids 0..S−1 and labels 1..S.
#include <cstdint>
#include <string>
#include <vector>

namespace marin {

struct TokenRows {
  std::string path;
  int64_t seq_len = 0;
  int64_t rows = 0;
  std::vector<uint32_t> ids;  // rows × (seq_len + 1)
  int64_t bytes = 0;          // the file's size and xxh64: a run records them so that a resume
  uint64_t xxh64 = 0;         // notices a replaced file (rows_source.cpp)

  // Reads and validates the file: size a multiple of 4·(seq_len+1), every id < vocab_size.
  static TokenRows load(const std::string& path, int64_t seq_len, int64_t vocab_size);
  // Fills tokens/labels [n, seq_len] for rows first .. first+n−1 (wrapping at the end);
  // 0 ≤ first < rows.
  void fill(int64_t first, int n, int32_t* tokens, int32_t* labels) const;
};

}  // namespace marin
