// JSONL documents: one JSON object per non-blank line, its text at a dotted field path. The one
// copy of the JSONL document rule; text_corpus::document_text (the corpus layout's stricter
// form) is built on it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "data/sources/document_source.hpp"

namespace marin::data {

// "a.b" -> {"a", "b"}; marin::Error on an empty path or component.
std::vector<std::string> field_path(std::string_view dotted, std::string_view option);

// A line holding only spaces, tabs and CRs is blank: it is no document (and is not counted).
bool blank_line(std::string_view line);

enum class JsonlSkip { none, missing_field, null_text };
std::string_view skip_reason(JsonlSkip s);

// The text of one non-blank line: valid UTF-8 (core/utf8.hpp), one JSON object (parsed into
// `scratch`), whose field at `path` is a string. A missing field or a null value returns null
// and says which in `skip`; anything else wrong is a marin::Error naming file:line.
const std::string* jsonl_text(std::string_view line, const std::string& file, uint64_t line_no,
                              const std::vector<std::string>& path, nlohmann::json& scratch,
                              JsonlSkip& skip);

// The value at `path` in `j`, or null when a component is missing.
const nlohmann::json* json_at(const nlohmann::json& j, const std::vector<std::string>& path);

// A document's id (--id-field): the string at `path`; "" when the path is empty, missing or null;
// any other value as its JSON text.
std::string jsonl_id(const nlohmann::json& j, const std::vector<std::string>& path);

SourceFormat jsonl_format();
// JSONL documents of a (possibly compressed) stream: for tests and fuzz targets.
std::unique_ptr<DocumentSource> jsonl_source(std::unique_ptr<class ByteStream> in,
                                             const SourceOptions& o);

}  // namespace marin::data
