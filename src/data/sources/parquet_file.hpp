// Our own reader of Parquet files' text columns (Debian ships no C++ Parquet library; see
// docs/data.md, "Parquet"). It parses the footer (PAR1 at both ends, the Thrift compact
// FileMetaData), lists the columns, and streams the values of one top-level BYTE_ARRAY column in
// row order, one page in memory at a time, skipping and counting nulls.
//
// Supported: data pages v1 and v2; PLAIN, PLAIN_DICTIONARY and RLE_DICTIONARY encodings;
// RLE/bit-packed definition levels (an optional column); several row groups; the codecs
// UNCOMPRESSED, SNAPPY, GZIP and ZSTD. Anything else (another codec or encoding, a column of
// another type, a nested or repeated column, a column chunk in another file) is refused with a
// marin::Error naming the file, the column, the row group and what was found, by name. Every
// length read from the file is checked against the file's size before anything is allocated.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace marin::data {

struct ParquetColumnChunk {
  int32_t physical_type = -1;
  int32_t codec = 0;
  int64_t num_values = 0;
  int64_t data_page_offset = 0;
  int64_t dictionary_page_offset = -1;  // -1: none
  int64_t total_compressed_size = 0;
  bool external = false;          // file_path set: the chunk lives in another file
  std::vector<std::string> path;  // path_in_schema
};

struct ParquetRowGroup {
  int64_t num_rows = 0;
  std::vector<ParquetColumnChunk> columns;
};

// One schema element below the root (flattened depth-first, as in the file).
struct ParquetSchemaNode {
  std::string name;
  int32_t physical_type = -1;  // -1: a group
  int32_t repetition = 0;      // 0 REQUIRED, 1 OPTIONAL, 2 REPEATED
  int32_t num_children = 0;
  int32_t converted_type = -1;  // -1: none
  std::string logical_type;     // e.g. "STRING", "" when absent
  int depth = 1;                // 1: a top-level field
};

struct ParquetMetadata {
  int64_t num_rows = 0;
  std::vector<ParquetSchemaNode> schema;  // without the root
  std::vector<ParquetRowGroup> row_groups;
};

// A column as listed to the user: its dotted path and types, e.g. "text: BYTE_ARRAY (STRING),
// OPTIONAL".
struct ParquetColumnInfo {
  std::string path;
  std::string physical_type;
  std::string logical_type;
  std::string repetition;
};

std::string_view parquet_type_name(int32_t physical_type);
std::string_view parquet_codec_name(int32_t codec);
std::string_view parquet_encoding_name(int32_t encoding);

// Parses a FileMetaData (the footer's Thrift bytes at `offset` in `file`) — exposed for tests.
ParquetMetadata parse_parquet_metadata(std::string_view footer, uint64_t offset,
                                       const std::string& file);

class ParquetFile {
 public:
  // Opens the file and parses its footer; marin::Error naming the file on any problem.
  explicit ParquetFile(std::string path);
  ~ParquetFile();
  ParquetFile(const ParquetFile&) = delete;
  ParquetFile& operator=(const ParquetFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  const ParquetMetadata& metadata() const { return meta_; }
  std::vector<ParquetColumnInfo> columns() const;
  // "a (BYTE_ARRAY, STRING), b (INT64), ..." for error messages.
  std::string column_list() const;

  // The xxh64 of the whole file (read once more, 1 MiB at a time), for manifests.
  uint64_t xxh64() const;

  // Reads `length` bytes at `offset` into `out` (checked against the file's size first).
  void read_at(uint64_t offset, uint64_t length, std::string& out, std::string_view what) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  ParquetMetadata meta_;
};

// Streams the non-null values of one top-level BYTE_ARRAY column of a file in row order.
//   ParquetTextColumn col(file, "text");
//   std::string_view text;
//   while (col.next(text)) use(text);  // `text` stays valid until the next call
//   col.nulls();                       // nulls skipped so far
// The column is checked when constructed (exists, top level, BYTE_ARRAY, not repeated);
// codecs and encodings when each chunk and page is reached.
class RleBitPackedDecoder;

class ParquetTextColumn {
 public:
  ParquetTextColumn(const ParquetFile& file, std::string_view column);
  ~ParquetTextColumn();

  bool next(std::string_view& value);
  // The next row's entry, null or not (for reading two columns row by row); false at the end.
  bool next_entry(std::string_view& value, bool& is_null);
  int64_t rows() const { return rows_; }  // entries returned so far
  // Where the reader is in the file: the end of the last page read (progress).
  uint64_t file_offset() const { return chunk_pos_; }
  int64_t nulls() const { return nulls_; }
  int64_t values() const { return values_; }
  // The row group of the value last returned (for callers' messages).
  size_t row_group() const { return row_group_; }

 private:
  bool load_page();  // the next data page; false at the column's end
  void start_chunk();
  void read_dictionary_page(std::string_view body, int32_t num_values);
  std::string_view next_plain();
  [[noreturn]] void refuse(std::string_view why) const;
  [[noreturn]] void corrupt(std::string_view why) const;

  const ParquetFile& file_;
  std::string name_;
  int max_def_ = 0;

  size_t row_group_ = 0;
  bool chunk_open_ = false;
  const ParquetColumnChunk* chunk_ = nullptr;
  uint64_t chunk_pos_ = 0, chunk_end_ = 0;  // the pages left in the current chunk
  uint64_t page_offset_ = 0;                // the current page's header, in the file
  int64_t chunk_values_left_ = 0;

  std::string dict_bytes_;                    // the chunk's dictionary page, decompressed
  std::vector<std::string_view> dictionary_;  // its values
  std::string raw_, page_;                    // the page as read, and its values decompressed

  // The current data page: its entries left (values and nulls), its definition levels and
  // values, decoded one at a time.
  int64_t entries_left_ = 0;
  std::unique_ptr<RleBitPackedDecoder> def_levels_, dict_indices_;
  std::string_view plain_;  // PLAIN values not yet read
  bool have_dictionary_ = false;
  // A v2 page's null count from its header (-1 for v1), checked against its levels at its end.
  int64_t page_nulls_expected_ = -1, page_nulls_seen_ = 0;

  int64_t nulls_ = 0, values_ = 0, rows_ = 0;
};

}  // namespace marin::data
