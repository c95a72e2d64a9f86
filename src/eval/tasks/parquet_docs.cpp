#include "eval/tasks/parquet_docs.hpp"

#include <string>

#include "core/fileio.hpp"
#include "data/sources/parquet_file.hpp"

namespace marin::eval {

void parquet_to_jsonl(const std::string& parquet, const std::string& jsonl) {
  const data::ParquetFile file(parquet);
  data::ParquetRowReader rows(file);
  std::string out, line;
  while (rows.next(line)) {
    out += line;
    out += '\n';
  }
  write_file_atomic(jsonl, out);
}

}  // namespace marin::eval
