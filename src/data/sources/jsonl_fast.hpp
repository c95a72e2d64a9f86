// The JSONL reader's fast path. nlohmann's lexer reads JSONL at ~150 MB/s (its string scan and
// per-character appends are 60 % of the time); simdjson (Debian's libsimdjson) parses a line at
// GB/s. The fast path decides a line exactly as the one JSONL rule (jsonl_text, and the reader's
// id rule) would, or declines it, and the caller then takes the rule's own path, which gives the
// same document or the error message. It declines every line it cannot vouch for: any parse error
// (invalid UTF-8, syntax, an unescaped control character, a lone surrogate, a number past a
// double's range), nesting near kMaxJsonDepth, a key written twice in one object, a top level that
// is not an object, a text that is neither a string nor null, an id that is neither a string nor
// null. tests/data/test_sources.cpp and fuzz_sources_jsonl check both paths agree on every line.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/sources/jsonl_source.hpp"

namespace marin::data {

class JsonlFastPath {
 public:
  JsonlFastPath();
  ~JsonlFastPath();
  JsonlFastPath(const JsonlFastPath&) = delete;
  JsonlFastPath& operator=(const JsonlFastPath&) = delete;

  enum class Result { text, skip, declined };
  // `text`: the document's text and id (empty when id_path is empty, or the id is missing or
  // null); `skip`: why there is no document (a missing field or a null text); `declined`: take
  // jsonl_text's path.
  Result decide(std::string_view line, const std::vector<std::string>& text_path,
                const std::vector<std::string>& id_path, std::string& text, std::string& id,
                JsonlSkip& skip);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The check of the fast path (tests and fuzz_jsonl_fast): it declines `line`, or decides it as
// the rule does (jsonl_text and jsonl_id, under the rule's UTF-8 check and JSON policy). Returns
// "" when they agree, else what differs.
std::string jsonl_fast_disagreement(JsonlFastPath& fast, std::string_view line,
                                    const std::vector<std::string>& text_path,
                                    const std::vector<std::string>& id_path);

}  // namespace marin::data
