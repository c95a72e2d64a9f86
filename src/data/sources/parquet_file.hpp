// Our own reader of Parquet files (Debian ships no C++ Parquet library; see
// docs/data.md, "Parquet"). It parses the footer (PAR1 at both ends, the Thrift compact
// FileMetaData), lists the columns, streams one leaf column of any depth (ParquetLeafReader: its
// repetition and definition levels and its BOOLEAN, INT32, INT64, FLOAT, DOUBLE or BYTE_ARRAY
// values), one top-level BYTE_ARRAY column's values in row order (ParquetTextColumn, for
// documents), or every row as JSON, structs and lists reassembled from the levels
// (ParquetRowReader, for evaluation task data), one page in memory at a time per column.
//
// Supported: data pages v1 and v2; PLAIN, PLAIN_DICTIONARY and RLE_DICTIONARY encodings, RLE for
// BOOLEAN; RLE/bit-packed definition and repetition levels; several row groups; the codecs
// UNCOMPRESSED, SNAPPY, GZIP and ZSTD. Anything else (another codec or encoding, INT96,
// FIXED_LEN_BYTE_ARRAY, a MAP, a column chunk in another file) is refused with a marin::Error
// naming the file, the column, the row group and what was found, by name. Every length read from
// the file is checked against the file's size before anything is allocated.
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

// One leaf column of the schema (a primitive field at any depth), as the general reader needs it.
struct ParquetLeaf {
  std::vector<std::string> path;  // path_in_schema, e.g. {"choices", "list", "element"}
  int32_t physical_type = -1;
  int max_def = 0, max_rep = 0;  // the largest definition and repetition levels
};

class RleBitPackedDecoder;
struct ParquetPageHeader;  // parquet_pages.cpp

// Streams the entries of one leaf column, any primitive physical type but INT96 and
// FIXED_LEN_BYTE_ARRAY, as (repetition level, definition level, value) in file order, one page
// in memory at a time: the page, level and codec logic of every column reader.
//   ParquetLeafReader r(file, leaf, "choices.list.element");
//   int rep, def;
//   while (r.next(rep, def)) if (def == leaf.max_def) use(r.bytes() / r.i64() / r.f64());
// The value accessors hold the entry last returned when its def is max_def (a BOOLEAN is 0/1
// in i64(), an INT32 or INT64 in i64(), a FLOAT or DOUBLE in f64(), a BYTE_ARRAY in bytes(),
// valid until the next call). Corruption (levels past their maximum, level and value streams
// that disagree, sizes past the file) is a marin::Error naming the file, the column (`name`),
// the row group and the page.
class ParquetLeafReader {
 public:
  ParquetLeafReader(const ParquetFile& file, ParquetLeaf leaf, std::string name);
  ~ParquetLeafReader();

  bool next(int& rep, int& def) {
    if (entries_left_ == 0 && !next_page()) return false;
    return read_entry(rep, def);
  }
  std::string_view bytes() const { return bytes_; }
  int64_t i64() const { return i64_; }
  double f64() const { return f64_; }
  const ParquetLeaf& leaf() const { return leaf_; }
  const std::string& name() const { return name_; }
  uint64_t file_offset() const { return chunk_pos_; }
  size_t row_group() const { return row_group_; }
  [[noreturn]] void corrupt(std::string_view why) const;

 private:
  bool next_page();  // finishes the page (its checks) and loads the next; false at the end
  bool load_page();
  // load_page's steps: the chunk's next page header (the page's body read into raw_), a
  // dictionary page, a data page's level and value streams, and its decoders.
  struct PageStreams {
    std::string_view rep_levels, def_levels, values;
  };
  void finish_chunk();
  ParquetPageHeader read_page_header(uint64_t& body_at);
  void load_dictionary_page(const ParquetPageHeader& h);
  PageStreams split_data_page_v1(const ParquetPageHeader& h);
  PageStreams split_data_page_v2(const ParquetPageHeader& h);
  void start_page_decoders(const ParquetPageHeader& h, const PageStreams& s);
  bool read_entry(int& rep, int& def);
  void start_chunk();
  void read_dictionary_page(std::string_view body, int32_t num_values);
  void read_plain();  // the next PLAIN value into bytes_/i64_/f64_
  [[noreturn]] void refuse(std::string_view why) const;

  const ParquetFile& file_;
  ParquetLeaf leaf_;
  std::string name_;

  size_t row_group_ = 0;
  bool chunk_open_ = false;
  const ParquetColumnChunk* chunk_ = nullptr;
  uint64_t chunk_pos_ = 0, chunk_end_ = 0;  // the pages left in the current chunk
  uint64_t page_offset_ = 0;                // the current page's header, in the file
  int64_t chunk_values_left_ = 0;

  std::string dict_bytes_;                           // the chunk's dictionary page, decompressed
  std::vector<std::string_view> dict_bytes_values_;  // its values: BYTE_ARRAY
  std::vector<int64_t> dict_i64_;                    // integers and booleans
  std::vector<double> dict_f64_;                     // FLOAT, DOUBLE
  size_t dict_size_ = 0;
  std::string raw_, page_;  // the page as read, and its values decompressed

  // The current data page: its entries left (values and nulls), its levels and values, decoded
  // one at a time.
  int64_t entries_left_ = 0;
  std::unique_ptr<RleBitPackedDecoder> def_levels_, rep_levels_, dict_indices_, rle_bools_;
  std::string_view plain_;  // PLAIN values not yet read
  uint64_t bool_bit_ = 0;   // PLAIN BOOLEAN: the next bit of plain_
  bool have_dictionary_ = false;
  // A v2 page's null count from its header (-1 for v1), checked against its levels at its end.
  int64_t page_nulls_expected_ = -1, page_nulls_seen_ = 0;

  std::string_view bytes_;
  int64_t i64_ = 0;
  double f64_ = 0;
};

// Streams the non-null values of one top-level BYTE_ARRAY column of a file in row order.
//   ParquetTextColumn col(file, "text");
//   std::string_view text;
//   while (col.next(text)) use(text);  // `text` stays valid until the next call
//   col.nulls();                       // nulls skipped so far
// The column is checked when constructed (exists, top level, BYTE_ARRAY, not repeated);
// codecs and encodings when each chunk and page is reached. A thin view of ParquetLeafReader.
class ParquetTextColumn {
 public:
  ParquetTextColumn(const ParquetFile& file, std::string_view column);
  ~ParquetTextColumn();

  bool next(std::string_view& value);
  // The next row's entry, null or not (for reading two columns row by row); false at the end.
  bool next_entry(std::string_view& value, bool& is_null) {
    int rep, def;
    if (!reader_->next(rep, def)) return false;
    ++rows_;
    is_null = def < max_def_;
    if (is_null) {
      ++nulls_;
      value = {};
    } else {
      value = reader_->bytes();
      ++values_;
    }
    return true;
  }
  int64_t rows() const { return rows_; }  // entries returned so far
  // Where the reader is in the file: the end of the last page read (progress).
  uint64_t file_offset() const { return reader_->file_offset(); }
  int64_t nulls() const { return nulls_; }
  int64_t values() const { return values_; }
  // The row group of the value last returned (for callers' messages).
  size_t row_group() const { return reader_->row_group(); }

 private:
  std::unique_ptr<ParquetLeafReader> reader_;
  int max_def_ = 0;
  int64_t nulls_ = 0, values_ = 0, rows_ = 0;
};

// The rows of a file as JSON objects, every top-level field its JSON value as the Hugging Face
// `datasets` library gives it: integers (INT32, INT64, with their INTEGER/INT_n/UINT_n
// annotations) as integers, BOOLEAN as true/false, FLOAT and DOUBLE as numbers, BYTE_ARRAY as
// (UTF-8) strings, a LIST (3-level list/element, or the legacy 2-level forms) or a bare REPEATED
// field as an array, any other group as an object, a null as null. Rows are reassembled from
// the leaf columns' repetition and definition levels (Dremel record assembly). Refused when
// constructed, naming the file, the column path and the type: MAP, INT96,
// FIXED_LEN_BYTE_ARRAY, and annotations with another meaning (DECIMAL, DATE, TIME, TIMESTAMP,
// ...). Levels that disagree between a field's leaf columns are a marin::Error naming the file
// and the column.
class ParquetRowReader {
 public:
  explicit ParquetRowReader(const ParquetFile& file);
  ~ParquetRowReader();
  // The next row as a JSON object (dumped into `json`, no newline); false at the end.
  bool next(std::string& json);
  int64_t rows() const { return rows_; }

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  int64_t rows_ = 0;
};

}  // namespace marin::data
