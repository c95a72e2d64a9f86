#include "data/sources/parquet_source.hpp"

#include <fmt/core.h>

#include <optional>

#include "core/error.hpp"
#include "data/sources/parquet_file.hpp"

namespace marin::data {

namespace {

class ParquetSource : public DocumentSource {
 public:
  ParquetSource(const std::string& path, const SourceOptions& o)
      : file_(path),
        text_(file_, o.text_field),
        id_field_(o.id_field),
        max_doc_bytes_(o.max_doc_bytes) {
    if (!o.id_field.empty()) id_.emplace(file_, o.id_field);
  }

  bool next(Document& d) override {
    std::string_view text, id;
    bool null_text = false, null_id = false;
    while (text_.next_entry(text, null_text)) {
      // The id column is read row by row alongside, so that it stays aligned with the text.
      if (id_ && !id_->next_entry(id, null_id))
        fail("{}: column '{}' has fewer rows than the text column ({})", file_.path(), id_field_,
             text_.rows());
      if (null_text) {
        ++skipped_["null text"];
        continue;
      }
      if (text.size() > max_doc_bytes_)
        fail("{}: row {} (row group {}): a text of {} bytes, over --max-doc-bytes {}", file_.path(),
             text_.rows(), text_.row_group(), text.size(), max_doc_bytes_);
      d.text.assign(text);
      d.id.assign(id_ && !null_id ? id : std::string_view());
      d.line = uint64_t(text_.rows());
      return true;
    }
    if (id_ && id_->next_entry(id, null_id))
      fail("{}: column '{}' has more rows than the text column ({})", file_.path(), id_field_,
           text_.rows());
    if (!hash_) hash_ = file_.xxh64();
    return false;
  }

  uint64_t bytes_read() const override { return hash_ ? file_.size() : text_.file_offset(); }
  uint64_t file_xxh64() const override { return hash_.value_or(0); }

 private:
  ParquetFile file_;
  ParquetTextColumn text_;
  std::optional<ParquetTextColumn> id_;
  std::string id_field_;
  uint64_t max_doc_bytes_;
  std::optional<uint64_t> hash_;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

SourceFormat parquet_format() {
  return {"parquet",
          [](std::string_view name, std::string_view head) {
            return ends_with(name, ".parquet") || head.substr(0, 4) == "PAR1";
          },
          [](const std::string& path, const SourceOptions& o) -> std::unique_ptr<DocumentSource> {
            return std::make_unique<ParquetSource>(path, o);
          },
          {}};
}

}  // namespace marin::data
