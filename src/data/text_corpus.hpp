// What a text corpus is on disk, written once for every reader and writer: the shard names
// (<domain>/<split>-NNNNN.jsonl, tokenized into <domain>/<split>-NNNNN.tok) and the document
// rule of a JSONL line. `marin corpus build` writes by these rules; `marin tokenize`, the
// contamination index, `marin eval --corpus` and `tokenizer train` read by them, so document d of
// a text shard is document d of its token shard.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace marin::text_corpus {

// "train-00003.jsonl": the file name of shard `index` of a split.
std::string shard_name(std::string_view split, uint64_t index);
// The split ("train" or "valid") of a text shard's file name (<split>-<digits>.jsonl), or nullopt
// for any other name.
std::optional<std::string> shard_split(std::string_view file_name);
// The token shard made from text shard <domain>/<stem>.jsonl: "<domain>/<stem>.tok".
std::string token_shard_file(std::string_view domain, std::string_view stem);
// The text shard's file name a token shard (<domain>/<stem>.tok) was made from: "<stem>.jsonl".
std::string text_shard_name(std::string_view token_shard_file);

// A line holding only spaces, tabs and CRs is blank: it is no document (and is not counted).
bool blank(std::string_view line);
// The text of one document line: valid UTF-8 (core/utf8.hpp), one JSON object with a string
// field "text" (other fields, such as "id", are ignored). `scratch` holds the parsed line (the
// result refers into it). marin::Error naming file:line and what is wrong.
const std::string& document_text(std::string_view line, const std::string& file, uint64_t line_no,
                                 nlohmann::json& scratch);
// One document line as for_each_document hands it over: its number (from 1), the line as
// written, the parsed object and its "text".
struct Document {
  uint64_t line;
  std::string_view raw;
  const nlohmann::json& fields;
  const std::string& text;
  // The document's "id" when it has a string one, else `fallback`.
  std::string id(std::string fallback) const;
};
// fn(document) for every line of `data` that is not blank, in order.
void for_each_document(std::string_view data, const std::string& file,
                       const std::function<void(const Document&)>& fn);

}  // namespace marin::text_corpus
