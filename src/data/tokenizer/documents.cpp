#include "data/tokenizer/documents.hpp"

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fileio.hpp"

namespace marin {

void read_documents(const std::string& path, std::vector<std::string>& docs) {
  std::string text = read_file(path);
  bool jsonl = path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  if (!jsonl) {
    docs.push_back(std::move(text));
    return;
  }
  size_t line_no = 0;
  for (std::string_view line : split_lines(text)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("'{}' line {}: not valid JSON (expected an object with a \"text\" field): {}", path,
           line_no, e.what());
    }
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
      fail("'{}' line {}: expected a JSON object with a string \"text\" field", path, line_no);
    docs.push_back(j["text"].get<std::string>());
  }
}

std::vector<std::string> read_documents(const std::vector<std::string>& paths) {
  std::vector<std::string> docs;
  for (const auto& p : paths) read_documents(p, docs);
  return docs;
}

}  // namespace marin
