// The footer of a Parquet file: the magic, the Thrift compact FileMetaData, the schema and the
// column list (the pages are read in parquet_pages.cpp).
#include "data/sources/parquet_file.hpp"

#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "data/sources/thrift_compact.hpp"

namespace marin::data {

namespace {

constexpr std::string_view kMagic = "PAR1";

// The LogicalType union's member by field id (parquet.thrift).
std::string_view logical_type_name(int16_t id) {
  switch (id) {
    case 1:
      return "STRING";
    case 2:
      return "MAP";
    case 3:
      return "LIST";
    case 4:
      return "ENUM";
    case 5:
      return "DECIMAL";
    case 6:
      return "DATE";
    case 7:
      return "TIME";
    case 8:
      return "TIMESTAMP";
    case 10:
      return "INTEGER";
    case 11:
      return "NULL";
    case 12:
      return "JSON";
    case 13:
      return "BSON";
    case 14:
      return "UUID";
    case 15:
      return "FLOAT16";
    case 16:
      return "VARIANT";
    case 17:
      return "GEOMETRY";
    case 18:
      return "GEOGRAPHY";
    default:
      return "UNKNOWN_LOGICAL_TYPE";
  }
}

std::string_view converted_type_name(int32_t c) {
  switch (c) {
    case 0:
      return "UTF8";
    case 1:
      return "MAP";
    case 2:
      return "MAP_KEY_VALUE";
    case 3:
      return "LIST";
    case 4:
      return "ENUM";
    case 5:
      return "DECIMAL";
    case 19:
      return "JSON";
    case 20:
      return "BSON";
    default:
      return "";
  }
}

std::string_view repetition_name(int32_t r) {
  switch (r) {
    case 0:
      return "REQUIRED";
    case 1:
      return "OPTIONAL";
    case 2:
      return "REPEATED";
    default:
      return "UNKNOWN_REPETITION";
  }
}

ParquetSchemaNode read_schema_element(ThriftCompactReader& r) {
  ParquetSchemaNode n;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(id, t)) {
    if (id == 1 && t == ThriftType::I32) {
      n.physical_type = r.read_i32();
    } else if (id == 3 && t == ThriftType::I32) {
      n.repetition = r.read_i32();
    } else if (id == 4 && t == ThriftType::Binary) {
      n.name = std::string(r.read_binary());
    } else if (id == 5 && t == ThriftType::I32) {
      n.num_children = r.read_i32();
    } else if (id == 6 && t == ThriftType::I32) {
      n.converted_type = r.read_i32();
    } else if (id == 10 && t == ThriftType::Struct) {
      // A union: one field, whose id names the logical type.
      r.begin_struct();
      int16_t lid;
      ThriftType lt;
      while (r.next_field(lid, lt)) {
        n.logical_type = std::string(logical_type_name(lid));
        r.skip(lt);
      }
      r.end_struct();
    } else {
      r.skip(t);
    }
  }
  r.end_struct();
  return n;
}

ParquetColumnChunk read_column_chunk(ThriftCompactReader& r) {
  ParquetColumnChunk c;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(id, t)) {
    if (id == 1 && t == ThriftType::Binary) {
      r.read_binary();
      c.external = true;
    } else if (id == 3 && t == ThriftType::Struct) {  // ColumnMetaData
      r.begin_struct();
      int16_t mid;
      ThriftType mt;
      while (r.next_field(mid, mt)) {
        if (mid == 1 && mt == ThriftType::I32) {
          c.physical_type = r.read_i32();
        } else if (mid == 3 && mt == ThriftType::List) {
          ThriftType et;
          const uint32_t n = r.begin_list(et);
          if (et != ThriftType::Binary) r.corrupt("path_in_schema is not a list of strings");
          for (uint32_t i = 0; i < n; ++i) c.path.emplace_back(r.read_binary());
        } else if (mid == 4 && mt == ThriftType::I32) {
          c.codec = r.read_i32();
        } else if (mid == 5 && mt == ThriftType::I64) {
          c.num_values = r.read_i64();
        } else if (mid == 7 && mt == ThriftType::I64) {
          c.total_compressed_size = r.read_i64();
        } else if (mid == 9 && mt == ThriftType::I64) {
          c.data_page_offset = r.read_i64();
        } else if (mid == 11 && mt == ThriftType::I64) {
          c.dictionary_page_offset = r.read_i64();
        } else {
          r.skip(mt);
        }
      }
      r.end_struct();
    } else {
      r.skip(t);
    }
  }
  r.end_struct();
  return c;
}

ParquetRowGroup read_row_group(ThriftCompactReader& r) {
  ParquetRowGroup g;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(id, t)) {
    if (id == 1 && t == ThriftType::List) {
      ThriftType et;
      const uint32_t n = r.begin_list(et);
      if (et != ThriftType::Struct) r.corrupt("RowGroup.columns is not a list of structs");
      for (uint32_t i = 0; i < n; ++i) g.columns.push_back(read_column_chunk(r));
    } else if (id == 3 && t == ThriftType::I64) {
      g.num_rows = r.read_i64();
    } else {
      r.skip(t);
    }
  }
  r.end_struct();
  return g;
}

// Gives each schema node its depth; refuses child counts that do not add up.
void assign_depths(ParquetMetadata& m, int32_t root_children, ThriftCompactReader& r) {
  // remaining[d]: children still expected at depth d+1.
  std::vector<int64_t> remaining{root_children};
  for (auto& n : m.schema) {
    while (!remaining.empty() && remaining.back() == 0) remaining.pop_back();
    if (remaining.empty()) r.corrupt("the schema has more elements than its num_children count");
    --remaining.back();
    n.depth = static_cast<int>(remaining.size());
    if (n.num_children < 0) r.corrupt(fmt::format("field '{}' has num_children < 0", n.name));
    if (n.num_children > 0) {
      if (remaining.size() > 100) r.corrupt("the schema is nested more than 100 deep");
      n.physical_type = -1;
      remaining.push_back(n.num_children);
    }
  }
  while (!remaining.empty() && remaining.back() == 0) remaining.pop_back();
  if (!remaining.empty()) r.corrupt("the schema has fewer elements than its num_children count");
}

}  // namespace

std::string_view parquet_type_name(int32_t t) {
  static constexpr std::string_view names[] = {
      "BOOLEAN", "INT32",  "INT64",      "INT96",
      "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
  if (t == -1) return "group";
  return t >= 0 && t < 8 ? names[t] : "UNKNOWN_TYPE";
}

std::string_view parquet_codec_name(int32_t c) {
  static constexpr std::string_view names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO",
                                               "BROTLI",       "LZ4",    "ZSTD", "LZ4_RAW"};
  return c >= 0 && c < 8 ? names[c] : "UNKNOWN_CODEC";
}

std::string_view parquet_encoding_name(int32_t e) {
  static constexpr std::string_view names[] = {
      "PLAIN",          "GROUP_VAR_INT",       "PLAIN_DICTIONARY",        "RLE",
      "BIT_PACKED",     "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
      "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
  return e >= 0 && e < 10 ? names[e] : "UNKNOWN_ENCODING";
}

ParquetMetadata parse_parquet_metadata(std::string_view footer, uint64_t offset,
                                       const std::string& file) {
  ThriftCompactReader r(footer, offset, fmt::format("{}: footer (FileMetaData)", file));
  ParquetMetadata m;
  int32_t root_children = -1;
  bool have_schema = false;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(id, t)) {
    if (id == 2 && t == ThriftType::List) {
      ThriftType et;
      const uint32_t n = r.begin_list(et);
      if (et != ThriftType::Struct) r.corrupt("the schema is not a list of structs");
      for (uint32_t i = 0; i < n; ++i) {
        ParquetSchemaNode node = read_schema_element(r);
        if (i == 0)
          root_children = node.num_children;
        else
          m.schema.push_back(std::move(node));
      }
      have_schema = n > 0;
    } else if (id == 3 && t == ThriftType::I64) {
      m.num_rows = r.read_i64();
    } else if (id == 4 && t == ThriftType::List) {
      ThriftType et;
      const uint32_t n = r.begin_list(et);
      if (et != ThriftType::Struct) r.corrupt("row_groups is not a list of structs");
      for (uint32_t i = 0; i < n; ++i) m.row_groups.push_back(read_row_group(r));
    } else {
      r.skip(t);
    }
  }
  r.end_struct();
  if (!have_schema) r.corrupt("no schema");
  assign_depths(m, root_children, r);
  return m;
}

ParquetFile::ParquetFile(std::string path) : path_(std::move(path)) {
  fd_ = open_input(path_);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fail("{}: cannot stat: {}", path_, std::strerror(err));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  try {
    // "PAR1", the data, the footer, its 4-byte length, "PAR1".
    if (size_ < 12)
      fail(
          "{}: not a Parquet file: {} bytes, shorter than the 12 of an empty one (magic, footer "
          "length, magic)",
          path_, size_);
    std::string head, tail;
    read_at(0, 4, head, "the leading magic");
    read_at(size_ - 8, 8, tail, "the footer length and trailing magic");
    if (head != kMagic || tail.substr(4) != kMagic)
      fail(
          "{}: not a Parquet file: expected the magic 'PAR1' at its start and end, found "
          "{:?} and {:?} (bytes 0 and {})",
          path_, head, tail.substr(4), size_ - 4);
    uint32_t footer_len;
    std::memcpy(&footer_len, tail.data(), 4);  // little-endian, as every supported host
    if (uint64_t(footer_len) > size_ - 12)
      fail(
          "{}: the footer length {} (at byte offset {}) runs past the file's start (the file has "
          "{} bytes; truncated or not Parquet)",
          path_, footer_len, size_ - 8, size_);
    const uint64_t footer_at = size_ - 8 - footer_len;
    std::string footer;
    read_at(footer_at, footer_len, footer, "the footer");
    meta_ = parse_parquet_metadata(footer, footer_at, path_);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

ParquetFile::~ParquetFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ParquetFile::read_at(uint64_t offset, uint64_t length, std::string& out,
                          std::string_view what) const {
  if (offset > size_ || length > size_ - offset)
    fail("{}: {} ({} bytes at byte offset {}) runs past the file's end ({} bytes; truncated?)",
         path_, what, length, offset, size_);
  out.resize(length);
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd_, out.data() + done, length - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      fail("{}: cannot read {} at byte offset {}: {}", path_, what, offset + done,
           std::strerror(errno));
    if (n == 0)
      fail("{}: {} ends early at byte offset {} (the file shrank?)", path_, what, offset + done);
    done += uint64_t(n);
  }
}

uint64_t ParquetFile::xxh64() const {
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  std::string buf;
  try {
    for (uint64_t at = 0; at < size_; at += buf.size()) {
      read_at(at, std::min<uint64_t>(uint64_t(1) << 20, size_ - at), buf, "the file's bytes");
      XXH64_update(state, buf.data(), buf.size());
    }
  } catch (...) {
    XXH64_freeState(state);
    throw;
  }
  const uint64_t h = XXH64_digest(state);
  XXH64_freeState(state);
  return h;
}

std::vector<ParquetColumnInfo> ParquetFile::columns() const {
  std::vector<ParquetColumnInfo> out;
  std::vector<std::string> prefix;
  for (const auto& n : meta_.schema) {
    prefix.resize(size_t(n.depth - 1));
    if (n.physical_type == -1) {
      prefix.push_back(n.name);
      continue;
    }
    std::string path;
    for (const auto& p : prefix) path += p + ".";
    path += n.name;
    std::string logical = n.logical_type;
    if (logical.empty()) logical = std::string(converted_type_name(n.converted_type));
    out.push_back({path, std::string(parquet_type_name(n.physical_type)), logical,
                   std::string(repetition_name(n.repetition))});
  }
  return out;
}

std::string ParquetFile::column_list() const {
  std::string s;
  for (const auto& c : columns()) {
    if (!s.empty()) s += ", ";
    s += fmt::format("{} ({}{}{})", c.path, c.physical_type, c.logical_type.empty() ? "" : ", ",
                     c.logical_type);
  }
  return s.empty() ? "none" : s;
}

}  // namespace marin::data
