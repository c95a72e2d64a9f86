// The registry of input formats: ONE line per format in source_formats(), in the order
// `--format auto` tries them (binary magic numbers first, then file-name extensions).
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "core/error.hpp"
#include "data/sources/byte_stream.hpp"
#include "data/sources/document_source.hpp"
#include "data/sources/jsonl_source.hpp"
#include "data/sources/parquet_source.hpp"
#include "data/sources/text_source.hpp"

namespace marin::data {

namespace {

// A format that is recognised but holds no text documents: listed so that `--format auto` names
// it and says what to do instead (token files are imported by token_import.hpp, not read here).
SourceFormat not_text(std::string_view name, bool (*detect)(std::string_view, std::string_view),
                      std::string_view reason) {
  return {name, detect, nullptr, reason};
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

const std::vector<SourceFormat>& source_formats() {
  static const std::vector<SourceFormat> formats = {
      parquet_format(),
      not_text(
          "llmc",
          [](std::string_view, std::string_view h) {
            return h.size() >= 4 && h.substr(0, 4) == std::string_view("\x88\xd8\x34\x01", 4);
          },
          "an llm.c token file: import it with `marin tokenize --format llmc` (its tokens are "
          "kept, no text is read)"),
      not_text(
          "megatron",
          [](std::string_view n, std::string_view h) {
            return ends_with(n, ".idx") || h.substr(0, 7) == "MMIDIDX";
          },
          "a Megatron-LM token index: import it with `marin tokenize --format megatron` (its "
          "tokens are kept, no text is read)"),
      jsonl_format(),
      text_format(),
  };
  return formats;
}

const SourceFormat& source_format(std::string_view name) {
  std::vector<std::string_view> names;
  for (const SourceFormat& f : source_formats()) {
    if (f.name == name) return f;
    names.push_back(f.name);
  }
  fail("--format '{}': expected auto or one of {}", name, fmt::join(names, ", "));
}

std::string_view strip_codec_suffix(std::string_view name) {
  for (std::string_view s : {".gz", ".zst", ".zstd"})
    if (name.size() > s.size() && name.substr(name.size() - s.size()) == s)
      return name.substr(0, name.size() - s.size());
  return name;
}

const SourceFormat* detect_format(const std::string& path, std::string& why) {
  const std::string head = read_head(path, 8);
  const std::string file = std::filesystem::path(path).filename().string();
  const std::string_view name = strip_codec_suffix(file);
  for (const SourceFormat& f : source_formats())
    if (f.detect && f.detect(name, head)) return &f;
  why = fmt::format(
      "'{}' is no known format: not .jsonl/.ndjson (JSONL) or .txt/.md/.markdown/"
      ".rst/.text (text), optionally .gz/.zst{}",
      file,
      detect_codec(head) != Codec::none
          ? fmt::format("; it is {} data", codec_name(detect_codec(head)))
          : "");
  return nullptr;
}

std::unique_ptr<DocumentSource> open_source(const std::string& path, std::string_view format,
                                            const SourceOptions& o) {
  const SourceFormat* f = nullptr;
  if (format == "auto") {
    std::string why;
    f = detect_format(path, why);
    if (!f) fail("{}: {} (give --format)", path, why);
  } else {
    f = &source_format(format);
  }
  if (!f->open) fail("{}: --format {}: {}", path, f->name, f->unavailable);
  return f->open(path, o);
}

}  // namespace marin::data
