#include "core/json_file.hpp"

#include "core/error.hpp"
#include "core/fileio.hpp"

namespace marin {

nlohmann::json parse_json(std::string_view text, std::string_view where, std::string_view hint) {
  try {
    return nlohmann::json::parse(text);
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
