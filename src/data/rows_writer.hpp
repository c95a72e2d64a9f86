#pragma once
// Writing the pre-tokenized rows format (docs/formats.md) from documents: the documents are
// concatenated in order into one stream and cut into rows of seq_len + 1 ids, the GPT-2 way
// (a row may span documents; the EOS that ends each document marks the boundary). The tail that
// does not fill a row is dropped and counted.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace marin {

struct RowsWritten {
  int64_t rows = 0, documents = 0, tokens = 0;
  int64_t dropped_tokens = 0;  // the tail shorter than a row (or past max_rows)
};

class RowsWriter {
 public:
  // max_rows 0: no limit. Ids must be < vocab_size (checked as they come).
  RowsWriter(int64_t seq_len, int64_t vocab_size, int64_t max_rows = 0);
  // Appends one document's ids; false once max_rows rows are full (the rest is not needed).
  bool add(std::span<const uint32_t> document);
  // Writes the full rows atomically to path (marin::Error if there is not one).
  RowsWritten finish(const std::string& path);

 private:
  int64_t width_, vocab_, max_ids_;
  std::vector<uint32_t> ids_;
  RowsWritten stats_;
};

}  // namespace marin
