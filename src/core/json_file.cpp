#include "core/json_file.hpp"

#include <unordered_set>
#include <vector>

#include "core/error.hpp"
#include "core/fileio.hpp"

namespace marin {

namespace {

// Thrown by the SAX builder when the text breaks the reading policy; turned into a
// marin::Error (parse_json) or a refusal (try_parse_json) below.
struct PolicyViolation {
  std::string what;
};

// Builds the document from nlohmann's SAX events (its parser is iterative) and applies the policy
// while it does: kMaxJsonDepth, so a document nested 100,000 deep is refused before any recursive
// walk of ours could overflow the stack, and the duplicate-key rule, so {"a": 1, "a": 2} is not
// silently read as {"a": 2}. (nlohmann's callback parser would do the same checks, but it scans
// the enclosing container at the end of every element: quadratic in a wide object or array, such
// as a safetensors header or a vocabulary's merges.)
class PolicyDomBuilder {
 public:
  using json = nlohmann::json;
  json root;

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(json::number_integer_t v) { return put(v); }
  bool number_unsigned(json::number_unsigned_t v) { return put(v); }
  bool number_float(json::number_float_t v, const std::string&) { return put(v); }
  bool string(std::string& v) { return put(std::move(v)); }
  bool binary(json::binary_t& v) { return put(json::binary(std::move(v))); }
  bool start_object(size_t) {
    open(json::object());
    keys_.emplace_back();
    return true;
  }
  bool key(std::string& k) {
    if (!keys_.back().insert(k).second)
      throw PolicyViolation{fmt::format("duplicate key \"{}\" in one object", k)};
    slot_ = &(*stack_.back())[k];
    return true;
  }
  bool end_object() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }
  bool start_array(size_t) {
    open(json::array());
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool parse_error(size_t, const std::string&, const json::exception& e) {
    // e.what() starts "[json.exception.parse_error.101] "; the id means nothing to a user.
    std::string_view what = e.what();
    if (const size_t id_end = what.find("] ");
        what.starts_with("[json.exception.") && id_end != std::string_view::npos)
      what.remove_prefix(id_end + 2);
    throw PolicyViolation{std::string(what)};
  }

 private:
  // Stores a value where the parser is: the root, the next element of the open array, or the
  // slot of the last key of the open object. Only the innermost open container changes, so the
  // pointers to its ancestors on the stack stay valid.
  template <class V>
  json* place(V&& v) {
    if (stack_.empty()) {
      root = json(std::forward<V>(v));
      return &root;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.emplace_back(std::forward<V>(v));
      return &top.back();
    }
    *slot_ = json(std::forward<V>(v));
    return slot_;
  }
  template <class V>
  bool put(V&& v) {
    place(std::forward<V>(v));
    return true;
  }
  void open(json container) {
    if (stack_.size() >= kMaxJsonDepth)
      throw PolicyViolation{
          fmt::format("nested deeper than {} levels (the limit for every JSON file marin reads)",
                      kMaxJsonDepth)};
    stack_.push_back(place(std::move(container)));
  }

  std::vector<json*> stack_;                           // the open containers, outermost first
  json* slot_ = nullptr;                               // the value of the open object's last key
  std::vector<std::unordered_set<std::string>> keys_;  // one set per open object
};

// The document, or the reason it breaks the syntax or the policy.
nlohmann::json parse_with_policy(std::string_view text) {
  if (text.size() > kMaxJsonBytes)
    throw PolicyViolation{
        fmt::format("{} bytes of JSON, more than the limit of {} bytes for one JSON document",
                    text.size(), kMaxJsonBytes)};
  PolicyDomBuilder b;
  nlohmann::json::sax_parse(text, &b);
  return std::move(b.root);
}

}  // namespace

nlohmann::json parse_json(std::string_view text, std::string_view where, std::string_view hint) {
  try {
    return parse_with_policy(text);
  } catch (const PolicyViolation& v) {
    if (hint.empty()) fail("{}: not valid JSON: {}", where, v.what);
    fail("{}: not valid JSON ({}): {}", where, hint, v.what);
  }
}

void json_type_error(std::string_view where, std::string_view key, std::string_view expected,
                     const nlohmann::json& j) {
  if (key.empty()) fail("{}: must be {}, not {}", where, expected, j.type_name());
  fail("{}: field \"{}\" must be {}, not {}", where, key, expected, j.type_name());
}

nlohmann::json load_json(const std::string& path, std::string_view hint) {
  return parse_json(read_file(path), path, hint);
}

std::optional<nlohmann::json> try_parse_json(std::string_view text) {
  try {
    return parse_with_policy(text);
  } catch (const PolicyViolation&) {
    return std::nullopt;
  }
}

}  // namespace marin
