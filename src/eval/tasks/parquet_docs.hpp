#pragma once
// Parquet task data (--dataset-root or dataset_path: parquet): the rows of a file as the
// documents the task renderer reads, through marin's own Parquet reader (src/data/sources).
#include <string>

namespace marin::eval {

// Writes every row of `parquet` to `jsonl`, one JSON object a line with every column as the
// `datasets` library gives it (data::ParquetRowReader): integers, booleans, floats, strings,
// lists as arrays, structs as objects, a null as null. A column of a type the reader does not
// read (MAP, INT96, FIXED_LEN_BYTE_ARRAY, DECIMAL, DATE, TIMESTAMP, ...) is refused with one
// marin::Error that names the file and every such column with its type; a value that is not
// UTF-8 names the file, the column and the row.
void parquet_to_jsonl(const std::string& parquet, const std::string& jsonl);

}  // namespace marin::eval
