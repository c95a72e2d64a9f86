// JSON, read in one place: every JSON document and JSON line the project reads (checkpoint
// configs and state, manifests, tokenizers, forecasts, ladders, metrics lines, task items) is
// parsed here, so that every way nlohmann::json can refuse a text -- a syntax error, a number too
// large for a double ("1e999", exception 406), invalid UTF-8 in a string -- reaches the user as a
// marin::Error naming the file: `run/ckpt/config.json: not valid JSON: parse error at line 1,
// column 9: syntax error ...`. No nlohmann exception escapes a reader (the fuzz targets check).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace marin {

// How strictly a document is read (defaults: nlohmann's rules).
struct JsonParseOptions {
  // A key that appears twice in one object is an error naming it (nlohmann would keep the last
  // one silently: a vocabulary with a duplicated token would lose an id).
  bool reject_duplicate_keys = false;
};

// Parses `text`; `where` names it in the error ("file", "file:line"), `hint` (when given) says
// what the file was expected to be: "<where>: not valid JSON (<hint>): <what nlohmann says>".
nlohmann::json parse_json(std::string_view text, std::string_view where, std::string_view hint = {},
                          const JsonParseOptions& options = {});
// Reads `path` (core/fileio: regular files only) and parses it.
nlohmann::json load_json(const std::string& path, std::string_view hint = {});
// The document, or nullopt when `text` is not valid JSON: for text allowed to be partial or
// stale (a metrics line being written, a lock file, a cache), where a refusal is not an error.
std::optional<nlohmann::json> try_parse_json(std::string_view text);

}  // namespace marin
