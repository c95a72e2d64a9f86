// The one seam every reader of documents goes through (`marin tokenize --in`, `tokenizer train`,
// read_documents): a DocumentSource yields documents (id, text, domain, split) of one input file
// in a deterministic order, streaming, holding at most one document plus a read buffer.
//
// Adding a format: write <format>_source.cpp (and .hpp) with a function returning its
// SourceFormat (name, detect, open), then add ONE line calling it to the table in
// source_registry.cpp. Nothing else changes: `--format NAME` and `--format auto` find it there.
// Formats listed there without an `open` (parquet, llmc, megatron until their branches merge)
// are refused by name with the reason the table gives.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace marin::data {

struct Document {
  std::string id;      // the input's own id when it has one (--id-field), else empty
  std::string text;    // the bytes the tokenizer encodes
  std::string domain;  // set by the layout reader (corpus) or the caller (--domain)
  std::string split;   // "train", "valid", "test" or empty (the caller's --valid-fraction)
  uint64_t line = 0;   // where it is: the line of a JSONL file, 0 for a whole file
};

struct SourceOptions {
  std::string text_field = "text";             // dotted path of the text in a JSONL object ("a.b")
  std::string id_field;                        // dotted path of the id; empty: no id
  uint64_t max_doc_bytes = uint64_t(1) << 30;  // a longer document is a marin::Error
};

class DocumentSource {
 public:
  virtual ~DocumentSource() = default;
  // The next document into `d`, or false at the end. marin::Error naming the file and the line
  // or byte offset on input that cannot be read.
  virtual bool next(Document& d) = 0;
  // Raw bytes of the file consumed so far (progress bars).
  virtual uint64_t bytes_read() const = 0;
  // The raw file's xxh64, valid once next() has returned false.
  virtual uint64_t file_xxh64() const = 0;
  // Documents passed over, by reason ("null text", "missing field"): counted, never silent.
  const std::map<std::string, uint64_t>& skipped() const { return skipped_; }

 protected:
  std::map<std::string, uint64_t> skipped_;
};

// One input format: its name, whether a file is of it, and how to open it.
struct SourceFormat {
  std::string_view name;
  // Whether a file named `file_name` (its compression suffix stripped) whose raw bytes start
  // with `head` (up to 8 bytes) is of this format (`--format auto`).
  bool (*detect)(std::string_view file_name, std::string_view head);
  std::unique_ptr<DocumentSource> (*open)(const std::string& path, const SourceOptions& o);
  std::string_view unavailable;  // non-empty: refused with this reason (open is null)
};

// The registry (source_registry.cpp), in detection order.
const std::vector<SourceFormat>& source_formats();
// The named format; marin::Error listing the known names otherwise.
const SourceFormat& source_format(std::string_view name);
// The format `--format auto` picks for `path`, or null with the reason in `why`.
const SourceFormat* detect_format(const std::string& path, std::string& why);
// Opens `path` as `format` ("auto" detects); refuses an unavailable format by name.
std::unique_ptr<DocumentSource> open_source(const std::string& path, std::string_view format,
                                            const SourceOptions& o);

// The file name without a compression suffix (.gz, .zst, .zstd): what the format is read from.
std::string_view strip_codec_suffix(std::string_view name);

}  // namespace marin::data
