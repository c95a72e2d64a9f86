#include "data/sources/jsonl_fast.hpp"

#include <simdjson.h>

#include <algorithm>
#include <optional>

#include "core/error.hpp"
#include "core/json_file.hpp"

namespace marin::data {

namespace dom = simdjson::dom;

namespace {

// simdjson counts nesting its own way; a margin below the policy's limit keeps every line it
// accepts within kMaxJsonDepth (deeper lines are declined and meet the policy's own check).
constexpr size_t kFastMaxDepth = kMaxJsonDepth - 8;

// Whether some object, at any depth, holds a key twice (the policy refuses such a document).
bool has_duplicate_key(dom::element e, std::vector<std::string_view>& keys) {
  if (e.is_array()) {
    for (dom::element v : dom::array(e))
      if (has_duplicate_key(v, keys)) return true;
    return false;
  }
  if (!e.is_object()) return false;
  const size_t first = keys.size();
  for (dom::key_value_pair kv : dom::object(e)) keys.push_back(kv.key);
  std::sort(keys.begin() + int64_t(first), keys.end());
  const bool dup = std::adjacent_find(keys.begin() + int64_t(first), keys.end()) != keys.end();
  keys.resize(first);
  if (dup) return true;
  for (dom::key_value_pair kv : dom::object(e))
    if (has_duplicate_key(kv.value, keys)) return true;
  return false;
}

// The value at `path`, as json_at finds it: nullopt when a component is missing or its parent is
// not an object.
std::optional<dom::element> value_at(dom::element e, const std::vector<std::string>& path) {
  for (const std::string& k : path) {
    if (!e.is_object()) return std::nullopt;
    if (dom::object(e).at_key(k).get(e)) return std::nullopt;
  }
  return e;
}

}  // namespace

struct JsonlFastPath::Impl {
  dom::parser parser;
  std::vector<std::string_view> keys;
  Impl() {
    if (parser.allocate(1 << 16, kFastMaxDepth)) throw std::bad_alloc();
  }
};

JsonlFastPath::JsonlFastPath() : impl_(std::make_unique<Impl>()) {}
JsonlFastPath::~JsonlFastPath() = default;

JsonlFastPath::Result JsonlFastPath::decide(std::string_view line,
                                            const std::vector<std::string>& text_path,
                                            const std::vector<std::string>& id_path,
                                            std::string& text, std::string& id, JsonlSkip& skip) {
  if (line.size() > kMaxJsonBytes) return Result::declined;
  dom::element root;
  // parse() copies the line into its padded buffer (simdjson reads up to 64 bytes past the end).
  if (impl_->parser.parse(line.data(), line.size()).get(root)) return Result::declined;
  if (!root.is_object() || has_duplicate_key(root, impl_->keys)) return Result::declined;
  const std::optional<dom::element> t = value_at(root, text_path);
  if (t && !t->is_null() && !t->is_string()) return Result::declined;
  id.clear();
  if (!id_path.empty())
    if (const std::optional<dom::element> i = value_at(root, id_path); i && !i->is_null()) {
      if (!i->is_string()) return Result::declined;
      id = std::string_view(*i);
    }
  if (!t || t->is_null()) {
    skip = t ? JsonlSkip::null_text : JsonlSkip::missing_field;
    return Result::skip;
  }
  skip = JsonlSkip::none;
  text = std::string_view(*t);
  return Result::text;
}

std::string jsonl_fast_disagreement(JsonlFastPath& fast, std::string_view line,
                                    const std::vector<std::string>& text_path,
                                    const std::vector<std::string>& id_path) {
  std::string text, id;
  JsonlSkip skip = JsonlSkip::none;
  const JsonlFastPath::Result r = fast.decide(line, text_path, id_path, text, id, skip);
  if (r == JsonlFastPath::Result::declined) return "";
  nlohmann::json j;
  JsonlSkip rule_skip = JsonlSkip::none;
  const std::string* rule_text = nullptr;
  try {
    rule_text = jsonl_text(line, "line", 1, text_path, j, rule_skip);
  } catch (const Error& e) {
    return fmt::format("the fast path accepted a line the rule refuses ({})", e.what());
  }
  if (r == JsonlFastPath::Result::skip)
    return rule_text || rule_skip != skip ? "the fast path skipped a line the rule does not" : "";
  if (!rule_text) return "the fast path read a document from a line the rule skips";
  if (*rule_text != text) return "the texts differ";
  if (jsonl_id(j, id_path) != id) return "the ids differ";
  return "";
}

}  // namespace marin::data
