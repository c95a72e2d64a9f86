#include "data/tokenizer/documents.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"

namespace marin {

void read_documents(const std::string& path, std::vector<std::string>& docs) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open text file '{}': {}", path, std::strerror(errno));
  bool jsonl = path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  if (!jsonl) {
    std::ostringstream ss;
    ss << f.rdbuf();
    docs.push_back(std::move(ss).str());
    return;
  }
  std::string line;
  size_t line_no = 0;
  while (std::getline(f, line)) {
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
