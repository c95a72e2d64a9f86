#pragma once
// Reading training/benchmark text: a `.jsonl` file is one document per non-blank line (the rule of
// data/text_corpus.hpp); any other file is one document holding all of its bytes.
#include <string>
#include <vector>

namespace marin {

// Appends the documents of `path`; throws marin::Error naming the file (and line) on a problem.
void read_documents(const std::string& path, std::vector<std::string>& docs);
std::vector<std::string> read_documents(const std::vector<std::string>& paths);

}  // namespace marin
