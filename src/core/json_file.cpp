#include "core/json_file.hpp"

#include <string>
#include <unordered_set>
#include <vector>

#include "core/error.hpp"
#include "core/fileio.hpp"

namespace marin {

namespace {
struct DuplicateKey {};  // thrown out of nlohmann's parser callback, caught below
}  // namespace

nlohmann::json parse_json(std::string_view text, std::string_view where, std::string_view hint,
                          const JsonParseOptions& options) {
  // The keys of each object being read, innermost last (only with reject_duplicate_keys).
  std::vector<std::unordered_set<std::string>> keys;
  std::string duplicate;
  const nlohmann::json::parser_callback_t check_keys = [&](int, nlohmann::json::parse_event_t event,
                                                           nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) keys.emplace_back();
    if (event == E::object_end) keys.pop_back();
    if (event == E::key && !keys.back().insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
      throw DuplicateKey{};
    }
    return true;
  };
  try {
    if (options.reject_duplicate_keys) return nlohmann::json::parse(text, check_keys);
    return nlohmann::json::parse(text);
  } catch (const DuplicateKey&) {
    fail("{}: key {} appears twice in one object{}{}", where, nlohmann::json(duplicate).dump(),
         hint.empty() ? "" : "; ", hint);
  } catch (const nlohmann::json::exception& e) {
    // e.what() starts "[json.exception.parse_error.101] "; the id means nothing to a user.
    std::string_view what = e.what();
    if (const size_t id_end = what.find("] ");
        what.starts_with("[json.exception.") && id_end != std::string_view::npos)
      what.remove_prefix(id_end + 2);
    if (hint.empty()) fail("{}: not valid JSON: {}", where, what);
    fail("{}: not valid JSON ({}): {}", where, hint, what);
  }
}

nlohmann::json load_json(const std::string& path, std::string_view hint) {
  return parse_json(read_file(path), path, hint);
}

std::optional<nlohmann::json> try_parse_json(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

}  // namespace marin
