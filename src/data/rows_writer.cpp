#include "data/rows_writer.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/limits.hpp"

namespace marin {

RowsWriter::RowsWriter(int64_t seq_len, int64_t vocab_size, int64_t max_rows)
    : width_(seq_len + 1), vocab_(vocab_size), max_ids_(0) {
  MARIN_CHECK(seq_len >= 1 && vocab_size >= 1, "rows: seq_len and vocab_size must be positive");
  max_ids_ = checked("rows: max_rows × (seq_len + 1)",
                     fmt::format("max_rows = {}, seq_len = {}", max_rows, seq_len),
                     [&] { return Checked(std::max<int64_t>(max_rows, 0)) * width_; });
}

bool RowsWriter::add(std::span<const uint32_t> document) {
  for (uint32_t id : document)
    if (int64_t(id) >= vocab_)
      fail("rows: token id {} of document {} is not below the vocabulary size {}", id,
           stats_.documents, vocab_);
  size_t take = document.size();
  if (max_ids_ > 0) {
    const int64_t room = max_ids_ - int64_t(ids_.size());
    take = size_t(std::clamp<int64_t>(room, 0, int64_t(take)));
    stats_.dropped_tokens += int64_t(document.size() - take);
  }
  ids_.insert(ids_.end(), document.begin(), document.begin() + int64_t(take));
  stats_.documents += take > 0;
  return max_ids_ == 0 || int64_t(ids_.size()) < max_ids_;
}

RowsWritten RowsWriter::finish(const std::string& path) {
  const int64_t rows = int64_t(ids_.size()) / width_;
  if (rows == 0)
    fail("{}: the documents hold {} tokens, fewer than one row of seq_len + 1 = {}", path,
         ids_.size(), width_);
  stats_.rows = rows;
  stats_.tokens = rows * width_;
  stats_.dropped_tokens += int64_t(ids_.size()) - stats_.tokens;
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(ids_.data()),
                                           size_t(stats_.tokens) * sizeof(uint32_t)));
  return stats_;
}

}  // namespace marin
