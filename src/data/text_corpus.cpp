#include "data/text_corpus.hpp"

#include <fmt/core.h>

#include <filesystem>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "data/sources/jsonl_source.hpp"

namespace marin::text_corpus {

std::string shard_name(std::string_view split, uint64_t index) {
  return fmt::format("{}-{:05d}.jsonl", split, index);
}

std::optional<std::string> shard_split(std::string_view name) {
  constexpr std::string_view ext = ".jsonl";
  for (std::string_view split : {"train", "valid"}) {
    if (name.size() <= split.size() + 1 + ext.size() || name.substr(0, split.size()) != split ||
        name[split.size()] != '-' || name.substr(name.size() - ext.size()) != ext)
      continue;
    const std::string_view digits =
        name.substr(split.size() + 1, name.size() - split.size() - 1 - ext.size());
    bool all_digits = true;
    for (char c : digits) all_digits = all_digits && c >= '0' && c <= '9';
    if (all_digits) return std::string(split);
  }
  return std::nullopt;
}

std::string token_shard_file(std::string_view domain, std::string_view stem) {
  return fmt::format("{}/{}.tok", domain, stem);
}

std::string text_shard_name(std::string_view token_shard_file) {
  return std::filesystem::path(token_shard_file).stem().string() + ".jsonl";
}

bool blank(std::string_view line) {
  return data::blank_line(line);
}

const std::string& document_text(std::string_view line, const std::string& file, uint64_t line_no,
                                 nlohmann::json& j) {
  // The corpus layout's rule is the JSONL reader's (data/sources/jsonl_source.hpp) with the text
  // at "text", where a document without one is an error rather than a counted skip.
  static const std::vector<std::string> text_path = {"text"};
  data::JsonlSkip skip;
  const std::string* text = data::jsonl_text(line, file, line_no, text_path, j, skip);
  if (!text)
    fail("{}:{}: expected an object with a string field \"text\" ({})", file, line_no,
         data::skip_reason(skip));
  return *text;
}

std::string Document::id(std::string fallback) const {
  const auto it = fields.find("id");
  return it != fields.end() && it->is_string() ? it->get<std::string>() : std::move(fallback);
}

void for_each_document(std::string_view data, const std::string& file,
                       const std::function<void(const Document&)>& fn) {
  const auto lines = split_lines(data);
  nlohmann::json j;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (blank(lines[i])) continue;
    const std::string& text = document_text(lines[i], file, i + 1, j);
    fn(Document{i + 1, lines[i], j, text});
  }
}

}  // namespace marin::text_corpus
