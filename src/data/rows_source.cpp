// The pre-tokenized-rows BatchSource (see batch_source.hpp).
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/hash.hpp"
#include "data/batch_source.hpp"
#include "data/token_rows.hpp"

namespace marin {
namespace {

class RowsSource : public BatchSource {
 public:
  explicit RowsSource(TokenRows rows) : rows_(std::move(rows)) {}
  void next(int B, int32_t* tokens, int32_t* labels, int32_t* seg) override {
    rows_.fill(next_row_, B, tokens, labels);
    for (int64_t i = 0; i < int64_t(B) * rows_.seq_len; ++i) seg[i] = 0;
    next_row_ = (next_row_ + B) % rows_.rows;
  }
  // The position, and the file it is a position in (row count, size, xxh64).
  nlohmann::json state() const override {
    return {{"kind", "rows"},
            {"next_row", next_row_},
            {"rows", rows_.rows},
            {"bytes", rows_.bytes},
            {"xxh64", hex64(rows_.xxh64)}};
  }
  void restore(const nlohmann::json& s) override;
  std::string describe() const override {
    return rows_.path + " (" + std::to_string(rows_.rows) + " pre-tokenized rows)";
  }
  int64_t distinct_rows() const override { return rows_.rows; }

 private:
  TokenRows rows_;
  int64_t next_row_ = 0;
};

void RowsSource::restore(const nlohmann::json& s) {
  const nlohmann::json pos = s.is_object() ? s.value("next_row", nlohmann::json()) : s;
  if (!pos.is_number_integer())
    fail("rows source state: next_row = {} is not an integer", pos.dump());
  const int64_t next = pos.get<int64_t>();
  if (next < 0 || next >= rows_.rows)
    fail("rows source state: next_row = {} is out of range [0, {}) (the rows of {})", next,
         rows_.rows, rows_.path);
  // States written before the file was identified have no size or hash; a replaced file of the
  // same length is then not noticed.
  const std::string hash = hex64(rows_.xxh64);
  if ((s.contains("bytes") && s["bytes"] != rows_.bytes) ||
      (s.contains("xxh64") && s["xxh64"] != hash))
    fail(
        "{}: the rows file changed since the run started (state: {} bytes, xxh64 {}; file now: {} "
        "bytes, xxh64 {}); resume with the rows the run was trained on",
        rows_.path, s.value("bytes", nlohmann::json()).dump(),
        s.value("xxh64", nlohmann::json()).dump(), rows_.bytes, hash);
  next_row_ = next;
}

}  // namespace

std::unique_ptr<BatchSource> make_rows_source(const std::string& path, int64_t seq_len,
                                              int64_t vocab_size) {
  return std::make_unique<RowsSource>(TokenRows::load(path, seq_len, vocab_size));
}

}  // namespace marin
