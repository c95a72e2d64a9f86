// JSONL reader: lines of a decoded byte stream, each an object whose text is at --text-field.
#include "data/sources/jsonl_source.hpp"

#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/json_file.hpp"
#include "core/utf8.hpp"
#include "data/sources/byte_stream.hpp"
#include "data/sources/jsonl_fast.hpp"

namespace marin::data {

std::vector<std::string> field_path(std::string_view dotted, std::string_view option) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t dot = dotted.find('.', start);
    const std::string_view part =
        dotted.substr(start, dot == dotted.npos ? dotted.npos : dot - start);
    if (part.empty())
      fail("{} '{}': expected a field name or a dotted path such as a.b", option, dotted);
    out.emplace_back(part);
    if (dot == dotted.npos) return out;
    start = dot + 1;
  }
}

bool blank_line(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

std::string_view skip_reason(JsonlSkip s) {
  return s == JsonlSkip::missing_field ? "missing field"
         : s == JsonlSkip::null_text   ? "null text"
                                       : "";
}

const nlohmann::json* json_at(const nlohmann::json& j, const std::vector<std::string>& path) {
  const nlohmann::json* at = &j;
  for (const std::string& k : path) {
    if (!at->is_object()) return nullptr;
    const auto it = at->find(k);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

const std::string* jsonl_text(std::string_view line, const std::string& file, uint64_t line_no,
                              const std::vector<std::string>& path, nlohmann::json& j,
                              JsonlSkip& skip) {
  skip = JsonlSkip::none;
  if (const size_t bad = utf8::first_invalid(line); bad != std::string_view::npos)
    fail(
        "{}:{}: not valid UTF-8 (byte 0x{:02x} at column {}); JSONL documents must be UTF-8 "
        "(`marin corpus build` re-encodes such bytes as Windows-1252)",
        file, line_no, static_cast<unsigned char>(line[bad]), bad + 1);
  j = parse_json(line, fmt::format("{}:{}", file, line_no));
  if (!j.is_object())
    fail(
        "{}:{}: expected an object with a string field \"{}\", found a JSON {} (one JSON object "
        "per line)",
        file, line_no, fmt::join(path, "."), j.type_name());
  const nlohmann::json* t = json_at(j, path);
  if (!t) {
    skip = JsonlSkip::missing_field;
    return nullptr;
  }
  if (t->is_null()) {
    skip = JsonlSkip::null_text;
    return nullptr;
  }
  if (!t->is_string())
    fail("{}:{}: expected an object with a string field \"{}\", found a JSON {} there", file,
         line_no, fmt::join(path, "."), t->type_name());
  return &t->get_ref<const std::string&>();
}

std::string jsonl_id(const nlohmann::json& j, const std::vector<std::string>& path) {
  if (path.empty()) return "";
  const nlohmann::json* id = json_at(j, path);
  if (!id || id->is_null()) return "";
  return id->is_string() ? id->get<std::string>() : id->dump();
}

namespace {

class JsonlSource : public DocumentSource {
 public:
  JsonlSource(std::unique_ptr<ByteStream> in, const SourceOptions& o)
      : in_(std::move(in)),
        lines_(*in_, o.max_doc_bytes),
        text_(field_path(o.text_field, "--text-field")) {
    if (!o.id_field.empty()) id_ = field_path(o.id_field, "--id-field");
  }

  bool next(Document& d) override {
    std::string_view line;
    while (lines_.next(line)) {
      if (blank_line(line)) continue;
      JsonlSkip skip;
      switch (fast_.decide(line, text_, id_, d.text, d.id, skip)) {
        case JsonlFastPath::Result::text:
          d.line = lines_.line_no();
          return true;
        case JsonlFastPath::Result::skip:
          ++skipped_[std::string(skip_reason(skip))];
          continue;
        case JsonlFastPath::Result::declined:  // the rule's own path: a document or its error
          break;
      }
      const std::string* t = jsonl_text(line, in_->name(), lines_.line_no(), text_, j_, skip);
      if (!t) {
        ++skipped_[std::string(skip_reason(skip))];
        continue;
      }
      d.text = *t;
      d.id = jsonl_id(j_, id_);
      d.line = lines_.line_no();
      return true;
    }
    return false;
  }
  uint64_t bytes_read() const override { return in_->raw_offset(); }
  uint64_t file_xxh64() const override { return in_->raw_xxh64(); }

 private:
  std::unique_ptr<ByteStream> in_;
  LineReader lines_;
  std::vector<std::string> text_, id_;
  nlohmann::json j_;
  JsonlFastPath fast_;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::unique_ptr<DocumentSource> jsonl_source(std::unique_ptr<ByteStream> in,
                                             const SourceOptions& o) {
  return std::make_unique<JsonlSource>(std::move(in), o);
}

SourceFormat jsonl_format() {
  return {"jsonl",
          [](std::string_view name, std::string_view) {
            return ends_with(name, ".jsonl") || ends_with(name, ".ndjson");
          },
          [](const std::string& path, const SourceOptions& o) {
            return jsonl_source(open_byte_stream(path), o);
          },
          {}};
}

}  // namespace marin::data
