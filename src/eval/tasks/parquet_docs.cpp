#include "eval/tasks/parquet_docs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/utf8.hpp"
#include "data/sources/parquet_file.hpp"

namespace marin::eval {

void parquet_to_jsonl(const std::string& parquet, const std::string& jsonl) {
  const data::ParquetFile file(parquet);
  constexpr int32_t kByteArray = 6;
  std::vector<std::string> names, refused;
  for (const data::ParquetSchemaNode& n : file.metadata().schema) {
    if (n.depth != 1) continue;
    if (n.physical_type == kByteArray && n.repetition != 2)
      names.push_back(n.name);
    else
      refused.push_back(fmt::format("{} ({}{})", n.name, data::parquet_type_name(n.physical_type),
                                    n.repetition == 2 ? ", repeated" : ""));
  }
  if (!refused.empty())
    fail(
        "{}: Parquet task data: only top-level string (BYTE_ARRAY) columns are read; this file "
        "also has {} (convert the split to JSONL)",
        parquet, fmt::format("{}", fmt::join(refused, ", ")));
  std::vector<std::unique_ptr<data::ParquetTextColumn>> cols;
  for (const std::string& n : names)
    cols.push_back(std::make_unique<data::ParquetTextColumn>(file, n));
  std::string out;
  for (int64_t row = 0;; ++row) {
    nlohmann::json doc = nlohmann::json::object();
    size_t ended = 0;
    for (size_t c = 0; c < cols.size(); ++c) {
      std::string_view v;
      bool is_null = false;
      if (!cols[c]->next_entry(v, is_null)) {
        ++ended;
        continue;
      }
      if (!is_null && !utf8::valid(v))
        fail("{}: column {}, row {}: not UTF-8 (at byte {})", parquet, names[c], row,
             utf8::first_invalid(v));
      doc[names[c]] = is_null ? nlohmann::json() : nlohmann::json(std::string(v));
    }
    if (ended == cols.size()) break;
    MARIN_CHECK(ended == 0, "{}: row {}: the columns have different numbers of rows", parquet, row);
    out += doc.dump() + "\n";
  }
  write_file_atomic(jsonl, out);
}

}  // namespace marin::eval
