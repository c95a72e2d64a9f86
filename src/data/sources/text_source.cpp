// Text reader: the whole decoded file is the document. A NUL byte means a binary file, which is
// refused rather than tokenized as text.
#include "data/sources/text_source.hpp"

#include <cstring>

#include "core/error.hpp"
#include "data/sources/byte_stream.hpp"

namespace marin::data {

namespace {

class TextSource : public DocumentSource {
 public:
  TextSource(const std::string& path, const SourceOptions& o)
      : in_(open_byte_stream(path)), max_(o.max_doc_bytes) {}

  bool next(Document& d) override {
    if (done_) return false;
    done_ = true;
    d.text = read_all(*in_, max_);
    if (d.text.empty()) {
      ++skipped_["empty file"];
      return false;
    }
    if (const void* nul = std::memchr(d.text.data(), '\0', d.text.size()))
      fail(
          "{}: a NUL byte at decoded offset {}: a binary file, not text (give --format for "
          "what it is)",
          in_->name(), static_cast<const char*>(nul) - d.text.data());
    d.id.clear();
    d.line = 0;
    return true;
  }
  uint64_t bytes_read() const override { return in_->raw_offset(); }
  uint64_t file_xxh64() const override { return in_->raw_xxh64(); }

 private:
  std::unique_ptr<ByteStream> in_;
  uint64_t max_;
  bool done_ = false;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

SourceFormat text_format() {
  return {"text",
          [](std::string_view name, std::string_view) {
            for (std::string_view e : {".txt", ".md", ".markdown", ".rst", ".text"})
              if (ends_with(name, e)) return true;
            return false;
          },
          [](const std::string& path, const SourceOptions& o) -> std::unique_ptr<DocumentSource> {
            return std::make_unique<TextSource>(path, o);
          },
          {}};
}

}  // namespace marin::data
