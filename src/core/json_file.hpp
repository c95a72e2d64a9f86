// JSON, read in one place: every JSON document and JSON line the project reads (checkpoint
// configs and state, manifests, tokenizers, forecasts, ladders, metrics lines, task items) is
// parsed here, so that every way nlohmann::json can refuse a text -- a syntax error, a number too
// large for a double ("1e999", exception 406), invalid UTF-8 in a string -- reaches the user as a
// marin::Error naming the file: `run/ckpt/config.json: not valid JSON: parse error at line 1,
// column 9: syntax error ...`. No nlohmann exception escapes a reader (the fuzz targets check).
//
// One reading policy for every such file, enforced here at parse time: nesting deeper than
// kMaxJsonDepth, a document larger than kMaxJsonBytes, and a key written twice in one object (which
// nlohmann::json would silently resolve to the last) are refused, naming the file and the key or
// the limit (docs/reliability.md, "Untrusted input").
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace marin {

// Arrays and objects nested deeper than this are refused: the project walks some documents
// recursively (a tokenizer's Sequence, a report's metrics), and no file it reads needs more.
inline constexpr size_t kMaxJsonDepth = 256;
// One JSON document (a file, or one line of a JSONL file) larger than this is refused. The largest
// real ones are tokenizer.json files of a few tens of MB.
inline constexpr size_t kMaxJsonBytes = size_t{1} << 30;

// Parses `text`; `where` names it in the error ("file", "file:line"), `hint` (when given) says
// what the file was expected to be: "<where>: not valid JSON (<hint>): <what nlohmann says>".
nlohmann::json parse_json(std::string_view text, std::string_view where,
                          std::string_view hint = {});
// "a number", "a string", ... for the types json_value reads.
template <class T>
const char* json_type_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "true or false";
  else if constexpr (std::is_arithmetic_v<T>)
    return "a number";
  else if constexpr (std::is_convertible_v<T, std::string_view>)
    return "a string";
  else
    return "of the expected type";
}
// marin::Error: `<where>: field "<key>" must be <expected>, not <j's type>` (no field: the
// document itself).
[[noreturn]] void json_type_error(std::string_view where, std::string_view key,
                                  std::string_view expected, const nlohmann::json& j);

// Reads `path` (core/fileio: regular files only) and parses it.
nlohmann::json load_json(const std::string& path, std::string_view hint = {});
// The document, or nullopt when `text` is not valid JSON or breaks the policy: for text allowed to
// be partial or stale (a metrics line being written, a lock file, a cache), where a refusal is not
// an error.
std::optional<nlohmann::json> try_parse_json(std::string_view text);

// The field `key` of the object `j` as a T, or `fallback` when `j` has no such field (or it is
// null). A field of another type is a marin::Error naming `where` (the file) and the field:
// `run/run.json: field "batch" must be a number, not a string`. `j` itself must be an object.
template <class T>
T json_value(const nlohmann::json& j, std::string_view key, T fallback, std::string_view where) {
  if (!j.is_object()) json_type_error(where, "", "an object", j);
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception&) {
    json_type_error(where, key, json_type_name<T>(), *it);
  }
}

}  // namespace marin
