// The pre-tokenized-rows BatchSource (see batch_source.hpp).
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
  nlohmann::json state() const override { return {{"kind", "rows"}, {"next_row", next_row_}}; }
  void restore(const nlohmann::json& s) override { next_row_ = s.at("next_row").get<int64_t>(); }
  std::string describe() const override {
    return rows_.path + " (" + std::to_string(rows_.rows) + " pre-tokenized rows)";
  }
  int64_t distinct_rows() const override { return rows_.rows; }

 private:
  TokenRows rows_;
  int64_t next_row_ = 0;
};

}  // namespace

std::unique_ptr<BatchSource> make_rows_source(const std::string& path, int64_t seq_len,
                                              int64_t vocab_size) {
  return std::make_unique<RowsSource>(TokenRows::load(path, seq_len, vocab_size));
}

}  // namespace marin
