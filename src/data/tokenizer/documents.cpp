#include "data/tokenizer/documents.hpp"

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "data/text_corpus.hpp"

namespace marin {

void read_documents(const std::string& path, std::vector<std::string>& docs) {
  std::string text = read_file(path);
  bool jsonl = path.size() >= 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  if (!jsonl) {
    docs.push_back(std::move(text));
    return;
  }
  text_corpus::for_each_document(text, path,
                                 [&](const text_corpus::Document& d) { docs.push_back(d.text); });
}

std::vector<std::string> read_documents(const std::vector<std::string>& paths) {
  std::vector<std::string> docs;
  for (const auto& p : paths) read_documents(p, docs);
  return docs;
}

}  // namespace marin
