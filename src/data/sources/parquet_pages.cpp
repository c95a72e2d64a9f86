// The pages of a Parquet leaf column (ParquetLeafReader, and ParquetTextColumn on it): page
// headers, the codecs, repetition and definition levels, PLAIN and dictionary-encoded values of
// every supported physical type (the footer is parsed in parquet_file.cpp, rows assembled in
// parquet_rows.cpp).
#include <fmt/core.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/error.hpp"
#include "data/sources/parquet_file.hpp"
#include "data/sources/thrift_compact.hpp"

namespace marin::data {

namespace {

// parquet.thrift's enums, as far as this reader goes.
constexpr int32_t kBoolean = 0, kInt32 = 1, kInt64 = 2, kFloat = 4, kDouble = 5, kByteArray = 6;
constexpr int32_t kOptional = 1, kRepeated = 2;
constexpr int32_t kUncompressed = 0, kSnappy = 1, kGzip = 2, kZstd = 6;
constexpr int32_t kPlain = 0, kPlainDictionary = 2, kRle = 3, kRleDictionary = 8;
constexpr int32_t kDataPage = 0, kDictionaryPage = 2, kDataPageV2 = 3;

// A page larger than this once decompressed is refused rather than allocated (a corrupt size
// must not allocate gigabytes; real writers make pages of about 1 MiB).
constexpr uint64_t kMaxPageBytes = uint64_t(1) << 30;
// A page header (Thrift, with its statistics) is first looked for in this many bytes.
constexpr uint64_t kHeaderWindow = 64 * 1024;

}  // namespace

// A page header, the fields the reader uses (declared in parquet_file.hpp for
// ParquetLeafReader's steps).
struct ParquetPageHeader {
  int32_t type = -1;
  int32_t uncompressed_size = -1, compressed_size = -1;
  int32_t num_values = -1, encoding = -1, def_encoding = kRle, rep_encoding = kRle;
  int32_t num_nulls = 0, def_bytes = 0, rep_bytes = 0;  // v2
  bool v2_compressed = true;
  size_t header_bytes = 0;
};

namespace {

ParquetPageHeader parse_page_header(ThriftCompactReader& r) {
  ParquetPageHeader h;
  r.begin_struct();
  int16_t id;
  ThriftType t;
  while (r.next_field(id, t)) {
    if (id == 1 && t == ThriftType::I32) {
      h.type = r.read_i32();
    } else if (id == 2 && t == ThriftType::I32) {
      h.uncompressed_size = r.read_i32();
    } else if (id == 3 && t == ThriftType::I32) {
      h.compressed_size = r.read_i32();
    } else if ((id == 5 || id == 7 || id == 8) && t == ThriftType::Struct) {
      // DataPageHeader, DictionaryPageHeader, DataPageHeaderV2.
      const int16_t kind = id;
      r.begin_struct();
      int16_t fid;
      ThriftType ft;
      while (r.next_field(fid, ft)) {
        if (fid == 1 && ft == ThriftType::I32) {
          h.num_values = r.read_i32();
        } else if (kind == 5 && fid == 2 && ft == ThriftType::I32) {
          h.encoding = r.read_i32();
        } else if (kind == 5 && fid == 3 && ft == ThriftType::I32) {
          h.def_encoding = r.read_i32();
        } else if (kind == 5 && fid == 4 && ft == ThriftType::I32) {
          h.rep_encoding = r.read_i32();
        } else if (kind == 7 && fid == 2 && ft == ThriftType::I32) {
          h.encoding = r.read_i32();
        } else if (kind == 8 && fid == 2 && ft == ThriftType::I32) {
          h.num_nulls = r.read_i32();
        } else if (kind == 8 && fid == 4 && ft == ThriftType::I32) {
          h.encoding = r.read_i32();
        } else if (kind == 8 && fid == 5 && ft == ThriftType::I32) {
          h.def_bytes = r.read_i32();
        } else if (kind == 8 && fid == 6 && ft == ThriftType::I32) {
          h.rep_bytes = r.read_i32();
        } else if (kind == 8 && fid == 7 &&
                   (ft == ThriftType::BoolTrue || ft == ThriftType::BoolFalse)) {
          h.v2_compressed = r.read_bool(ft);
        } else {
          r.skip(ft);
        }
      }
      r.end_struct();
    } else {
      r.skip(t);
    }
  }
  r.end_struct();
  h.header_bytes = r.consumed();
  return h;
}

uint32_t bit_width(uint32_t max_value) {
  uint32_t w = 0;
  while (max_value >> w) ++w;
  return w;
}

}  // namespace

// The RLE/bit-packed hybrid encoding (definition levels, dictionary indices), decoded one value
// at a time. `fail_at` reports corruption with the caller's context.
class RleBitPackedDecoder {
 public:
  RleBitPackedDecoder(std::string_view bytes, uint32_t width,
                      std::function<void(std::string_view)> fail_at)
      : p_(reinterpret_cast<const uint8_t*>(bytes.data())),
        end_(p_ + bytes.size()),
        width_(width),
        fail_(std::move(fail_at)) {}

  uint32_t next() {
    while (left_ == 0) read_run_header();
    --left_;
    if (rle_) return value_;
    const uint64_t bit = index_++ * width_;
    const uint64_t first = bit / 8, last = (bit + width_ + 7) / 8;
    if (last > uint64_t(packed_end_ - packed_)) fail_("a bit-packed run ends early");
    uint64_t v = 0;
    for (uint64_t i = first; i < last; ++i) v |= uint64_t(packed_[i]) << (8 * (i - first));
    return uint32_t((v >> (bit % 8)) & ((uint64_t(1) << width_) - 1));
  }

 private:
  void read_run_header() {
    uint64_t header = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ == end_) fail_("the RLE/bit-packed data ends early");
      if (shift > 35) fail_("an RLE/bit-packed run header longer than 5 bytes");
      const uint8_t b = *p_++;
      header |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    if (header & 1) {  // bit-packed: (header >> 1) groups of 8 values
      const uint64_t groups = header >> 1;
      rle_ = false;
      left_ = groups * 8;
      index_ = 0;
      packed_ = p_;
      // The last run may be shorter than declared (writers pad it to 8 values): values past the
      // bytes present are refused when read, not here.
      const uint64_t bytes = std::min<uint64_t>(groups * width_, uint64_t(end_ - p_));
      packed_end_ = p_ + bytes;
      p_ += bytes;
    } else {
      rle_ = true;
      left_ = header >> 1;
      const uint32_t nbytes = (width_ + 7) / 8;
      if (uint64_t(end_ - p_) < nbytes) fail_("an RLE run's value ends early");
      value_ = 0;
      for (uint32_t i = 0; i < nbytes; ++i) value_ |= uint32_t(p_[i]) << (8 * i);
      p_ += nbytes;
    }
  }

  const uint8_t* p_;
  const uint8_t* end_;
  uint32_t width_;
  std::function<void(std::string_view)> fail_;
  uint64_t left_ = 0;
  bool rle_ = true;
  uint32_t value_ = 0;
  const uint8_t* packed_ = nullptr;
  const uint8_t* packed_end_ = nullptr;
  uint64_t index_ = 0;
};

namespace {

// Decompresses `in` into `out`, which must come to exactly `expected` bytes.
void decompress(int32_t codec, std::string_view in, uint64_t expected, std::string& out,
                const std::function<void(std::string_view)>& corrupt) {
  if (expected > kMaxPageBytes)
    corrupt(fmt::format("a page of {} bytes decompressed, over the reader's limit of {} bytes",
                        expected, kMaxPageBytes));
  out.resize(expected);
  switch (codec) {
    case kSnappy: {
      size_t n = 0;
      if (!snappy::GetUncompressedLength(in.data(), in.size(), &n) || n != expected)
        corrupt(
            fmt::format("SNAPPY data that does not decompress to the page's {} bytes", expected));
      if (!snappy::RawUncompress(in.data(), in.size(), out.data())) corrupt("corrupt SNAPPY data");
      return;
    }
    case kZstd: {
      const size_t n = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
      if (ZSTD_isError(n)) corrupt(fmt::format("corrupt ZSTD data: {}", ZSTD_getErrorName(n)));
      if (n != expected)
        corrupt(fmt::format("ZSTD data of {} bytes decompressed, the page header says {}", n,
                            expected));
      return;
    }
    case kGzip: {
      z_stream z{};
      if (inflateInit2(&z, 15 + 32) != Z_OK) corrupt("zlib cannot start");
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
      z.avail_in = uInt(in.size());
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = uInt(out.size());
      const int rc = inflate(&z, Z_FINISH);
      const uint64_t produced = z.total_out;
      inflateEnd(&z);
      if (rc != Z_STREAM_END) {
        if (rc == Z_BUF_ERROR && z.avail_out == 0)
          corrupt(fmt::format("GZIP data longer than the page header's {} bytes", expected));
        corrupt(fmt::format("corrupt GZIP data (zlib error {})", rc));
      }
      if (produced != expected)
        corrupt(fmt::format("GZIP data of {} bytes decompressed, the page header says {}", produced,
                            expected));
      return;
    }
    default:
      corrupt(fmt::format("codec {}", parquet_codec_name(codec)));
  }
}

}  // namespace

ParquetTextColumn::ParquetTextColumn(const ParquetFile& file, std::string_view column) {
  const std::string name(column);
  const auto& schema = file.metadata().schema;
  const ParquetSchemaNode* node = nullptr;
  for (const auto& n : schema)
    if (n.depth == 1 && n.name == name) node = &n;
  const std::string_view supported =
      "only a top-level BYTE_ARRAY (STRING/UTF8 or binary) column is supported; nested fields "
      "(structs, lists, maps) are not";
  if (node == nullptr) {
    for (const auto& c : file.columns())
      if (c.path == name)
        fail("{}: column '{}' is a nested field: {} (columns: {})", file.path(), name, supported,
             file.column_list());
    fail("{}: no column '{}'; the file's columns are: {}", file.path(), name, file.column_list());
  }
  if (node->physical_type == -1)
    fail("{}: column '{}' is a group (struct, list or map): {} (columns: {})", file.path(), name,
         supported, file.column_list());
  if (node->repetition == kRepeated)
    fail("{}: column '{}' is REPEATED (a list of values per row): {}", file.path(), name,
         supported);
  if (node->physical_type != kByteArray)
    fail(
        "{}: column '{}' is {}{}, not a text column: expected BYTE_ARRAY (STRING/UTF8 or "
        "binary)",
        file.path(), name, parquet_type_name(node->physical_type),
        node->logical_type.empty() ? "" : " (" + node->logical_type + ")");
  max_def_ = node->repetition == kOptional ? 1 : 0;
  reader_ =
      std::make_unique<ParquetLeafReader>(file, ParquetLeaf{{name}, kByteArray, max_def_, 0}, name);
}

ParquetTextColumn::~ParquetTextColumn() = default;

bool ParquetTextColumn::next(std::string_view& value) {
  bool is_null = false;
  while (next_entry(value, is_null))
    if (!is_null) return true;
  return false;
}

ParquetLeafReader::ParquetLeafReader(const ParquetFile& file, ParquetLeaf leaf, std::string name)
    : file_(file), leaf_(std::move(leaf)), name_(std::move(name)) {
  const int32_t t = leaf_.physical_type;
  if (t != kBoolean && t != kInt32 && t != kInt64 && t != kFloat && t != kDouble && t != kByteArray)
    fail(
        "{}: column '{}' is {}: not supported (supported: BOOLEAN, INT32, INT64, FLOAT, DOUBLE, "
        "BYTE_ARRAY)",
        file.path(), name_, parquet_type_name(t));
  if (leaf_.max_def < 0 || leaf_.max_rep < 0 || leaf_.max_def > 100 || leaf_.max_rep > 100)
    fail("{}: column '{}' has levels past the reader's limit of 100", file.path(), name_);
}

ParquetLeafReader::~ParquetLeafReader() = default;

void ParquetLeafReader::refuse(std::string_view why) const {
  fail(
      "{}: column '{}', row group {}: {} is not supported (supported: codecs UNCOMPRESSED, "
      "SNAPPY, GZIP, ZSTD; encodings PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY, and RLE for "
      "BOOLEAN; data pages v1 and v2)",
      file_.path(), name_, row_group_, why);
}

void ParquetLeafReader::corrupt(std::string_view why) const {
  fail("{}: column '{}', row group {}, page at byte offset {}: {}", file_.path(), name_, row_group_,
       page_offset_, why);
}

void ParquetLeafReader::start_chunk() {
  const ParquetRowGroup& g = file_.metadata().row_groups[row_group_];
  chunk_ = nullptr;
  for (const auto& c : g.columns)
    if (c.path == leaf_.path) chunk_ = &c;
  page_offset_ = 0;
  if (chunk_ == nullptr) corrupt("the row group has no column chunk for the column");
  if (chunk_->external) refuse("a column chunk stored in another file (file_path)");
  if (chunk_->physical_type != leaf_.physical_type)
    corrupt(fmt::format("the column chunk's type is {}, the schema's {}",
                        parquet_type_name(chunk_->physical_type),
                        parquet_type_name(leaf_.physical_type)));
  const int32_t codec = chunk_->codec;
  if (codec != kUncompressed && codec != kSnappy && codec != kGzip && codec != kZstd)
    refuse(fmt::format("codec {}", parquet_codec_name(codec)));
  // Some writers store a dictionary_page_offset of 0 for "none".
  const int64_t dict = chunk_->dictionary_page_offset;
  const int64_t start =
      dict > 0 && dict < chunk_->data_page_offset ? dict : chunk_->data_page_offset;
  const uint64_t size = file_.size();
  page_offset_ = uint64_t(std::max<int64_t>(start, 0));
  if (start < 4 || uint64_t(start) >= size || chunk_->total_compressed_size < 0 ||
      uint64_t(chunk_->total_compressed_size) > size - uint64_t(start))
    corrupt(
        fmt::format("the column chunk ({} bytes at byte offset {}) lies outside the file's "
                    "{} bytes",
                    chunk_->total_compressed_size, start, size));
  if (chunk_->num_values < 0) corrupt("the column chunk has a negative value count");
  chunk_pos_ = uint64_t(start);
  chunk_end_ = chunk_pos_ + uint64_t(chunk_->total_compressed_size);
  chunk_values_left_ = chunk_->num_values;
  dict_size_ = 0;
  dict_bytes_.clear();
  have_dictionary_ = false;
}

void ParquetLeafReader::read_dictionary_page(std::string_view body, int32_t num_values) {
  const int32_t t = leaf_.physical_type;
  const uint64_t min_bytes = t == kByteArray ? 4 : t == kInt64 || t == kDouble ? 8 : 4;
  if (t == kBoolean) refuse("a dictionary page in a BOOLEAN column");
  if (uint64_t(num_values) > body.size() / min_bytes)
    corrupt(fmt::format("a dictionary of {} values in {} bytes", num_values, body.size()));
  dict_bytes_values_.clear();
  dict_i64_.clear();
  dict_f64_.clear();
  plain_ = body;
  for (int32_t i = 0; i < num_values; ++i) {
    read_plain();
    if (t == kByteArray)
      dict_bytes_values_.push_back(bytes_);
    else if (t == kFloat || t == kDouble)
      dict_f64_.push_back(f64_);
    else
      dict_i64_.push_back(i64_);
  }
  dict_size_ = size_t(num_values);
}

void ParquetLeafReader::read_plain() {
  const auto take = [this](size_t n) {
    if (plain_.size() < n)
      corrupt(fmt::format("PLAIN {} values end early (the page has fewer values than levels)",
                          parquet_type_name(leaf_.physical_type)));
    const char* p = plain_.data();
    plain_.remove_prefix(n);
    return p;
  };
  switch (leaf_.physical_type) {
    case kByteArray: {
      uint32_t n;
      std::memcpy(&n, take(4), 4);
      if (n > plain_.size())
        corrupt(fmt::format("a PLAIN value of {} bytes past the page's end ({} bytes left)", n,
                            plain_.size()));
      bytes_ = plain_.substr(0, n);
      plain_.remove_prefix(n);
      return;
    }
    case kInt32: {
      int32_t v;
      std::memcpy(&v, take(4), 4);
      i64_ = v;
      return;
    }
    case kInt64:
      std::memcpy(&i64_, take(8), 8);
      return;
    case kFloat: {
      float v;
      std::memcpy(&v, take(4), 4);
      f64_ = v;
      return;
    }
    case kDouble:
      std::memcpy(&f64_, take(8), 8);
      return;
    default: {  // kBoolean: bit-packed, least significant bit first
      if (bool_bit_ / 8 >= plain_.size())
        corrupt("PLAIN BOOLEAN values end early (the page has fewer values than levels)");
      i64_ = (uint8_t(plain_[bool_bit_ / 8]) >> (bool_bit_ % 8)) & 1;
      ++bool_bit_;
      return;
    }
  }
}

// The chunk is read to its end (its value count and its bytes agree): on to the next row group.
void ParquetLeafReader::finish_chunk() {
  if (chunk_values_left_ != 0)
    corrupt(
        fmt::format("the column chunk ends with {} of its values unread (its sizes "
                    "disagree)",
                    chunk_values_left_));
  chunk_open_ = false;
  ++row_group_;
}

// The header at chunk_pos_, a Thrift struct of unknown length, looked for in a growing window;
// checks its sizes, sets `body_at` to its page's body and moves chunk_pos_ past that body.
ParquetPageHeader ParquetLeafReader::read_page_header(uint64_t& body_at) {
  page_offset_ = chunk_pos_;
  const uint64_t left = chunk_end_ - chunk_pos_;
  ParquetPageHeader h;
  for (uint64_t window = std::min(kHeaderWindow, left);; window = std::min(window * 4, left)) {
    file_.read_at(chunk_pos_, window, raw_, "a page header");
    try {
      ThriftCompactReader r(raw_, chunk_pos_,
                            fmt::format("{}: column '{}', row group {}, page header", file_.path(),
                                        name_, row_group_));
      h = parse_page_header(r);
      break;
    } catch (const Error&) {
      if (window == left) throw;
    }
  }
  if (h.compressed_size < 0 || h.uncompressed_size < 0)
    corrupt(fmt::format("negative page sizes ({} compressed, {} uncompressed)", h.compressed_size,
                        h.uncompressed_size));
  if (uint64_t(h.compressed_size) > left - h.header_bytes)
    corrupt(fmt::format("a page of {} bytes runs past its column chunk's end ({} bytes left)",
                        h.compressed_size, left - h.header_bytes));
  body_at = chunk_pos_ + h.header_bytes;
  chunk_pos_ = body_at + uint64_t(h.compressed_size);
  return h;
}

// A dictionary page (its body in raw_): decompressed into dict_bytes_, then its values.
void ParquetLeafReader::load_dictionary_page(const ParquetPageHeader& h) {
  const auto fail_here = [this](std::string_view why) { corrupt(why); };
  const int32_t codec = chunk_->codec;
  if (h.encoding != kPlain && h.encoding != kPlainDictionary)
    refuse(fmt::format("dictionary page encoding {}", parquet_encoding_name(h.encoding)));
  if (codec == kUncompressed) {
    dict_bytes_ = std::move(raw_);
    raw_.clear();
  } else {
    decompress(codec, raw_, uint64_t(h.uncompressed_size), dict_bytes_, fail_here);
  }
  read_dictionary_page(dict_bytes_, h.num_values);
  have_dictionary_ = true;
}

// A data page v1 (its body in raw_): the whole page compressed, each level stream behind its
// 4-byte length, then the values.
ParquetLeafReader::PageStreams ParquetLeafReader::split_data_page_v1(const ParquetPageHeader& h) {
  const auto fail_here = [this](std::string_view why) { corrupt(why); };
  const int32_t codec = chunk_->codec;
  PageStreams s;
  std::string_view body = raw_;
  if (codec != kUncompressed) {
    decompress(codec, raw_, uint64_t(h.uncompressed_size), page_, fail_here);
    body = page_;
  } else if (h.uncompressed_size != h.compressed_size) {
    corrupt(fmt::format("an UNCOMPRESSED page of {} bytes whose header says {} uncompressed",
                        h.compressed_size, h.uncompressed_size));
  }
  const auto take_levels = [&](std::string_view what) {
    uint32_t n = 0;
    if (body.size() < 4)
      corrupt(fmt::format("the {} levels' length runs past the page's end", what));
    std::memcpy(&n, body.data(), 4);
    if (n > body.size() - 4)
      corrupt(fmt::format("{} levels of {} bytes in a page of {}", what, n, body.size()));
    const std::string_view l = body.substr(4, n);
    body.remove_prefix(4 + size_t(n));
    return l;
  };
  if (leaf_.max_rep > 0) {
    if (h.rep_encoding != kRle)
      refuse(fmt::format("repetition level encoding {}", parquet_encoding_name(h.rep_encoding)));
    s.rep_levels = take_levels("repetition");
  }
  if (leaf_.max_def > 0) {
    if (h.def_encoding != kRle)
      refuse(fmt::format("definition level encoding {}", parquet_encoding_name(h.def_encoding)));
    s.def_levels = take_levels("definition");
  }
  s.values = body;
  return s;
}

// A data page v2 (its body in raw_): levels uncompressed, then the values, compressed or not.
ParquetLeafReader::PageStreams ParquetLeafReader::split_data_page_v2(const ParquetPageHeader& h) {
  const auto fail_here = [this](std::string_view why) { corrupt(why); };
  const int32_t codec = chunk_->codec;
  PageStreams s;
  if (h.rep_bytes < 0 || h.def_bytes < 0 ||
      uint64_t(h.def_bytes) + uint64_t(h.rep_bytes) > raw_.size())
    corrupt(fmt::format("levels of {} + {} bytes in a page of {}", h.rep_bytes, h.def_bytes,
                        raw_.size()));
  if (leaf_.max_rep == 0 && h.rep_bytes != 0)
    corrupt(
        fmt::format("repetition levels of {} bytes in a column that is not repeated", h.rep_bytes));
  if (h.num_nulls < 0 || h.num_nulls > h.num_values)
    corrupt(fmt::format("{} nulls in a page of {} values", h.num_nulls, h.num_values));
  s.rep_levels = std::string_view(raw_).substr(0, size_t(h.rep_bytes));
  s.def_levels = std::string_view(raw_).substr(size_t(h.rep_bytes), size_t(h.def_bytes));
  s.values = std::string_view(raw_).substr(size_t(h.rep_bytes) + size_t(h.def_bytes));
  const int32_t level_bytes = h.def_bytes + h.rep_bytes;  // both level streams
  if (h.uncompressed_size < level_bytes)
    corrupt(
        fmt::format("a page whose uncompressed size {} is less than its definition "
                    "levels' {} bytes",
                    h.uncompressed_size, level_bytes));
  const uint64_t values_size = uint64_t(h.uncompressed_size) - uint64_t(level_bytes);
  if (codec != kUncompressed && h.v2_compressed) {
    decompress(codec, s.values, values_size, page_, fail_here);
    s.values = page_;
  } else if (s.values.size() != values_size) {
    corrupt(fmt::format("uncompressed values of {} bytes whose header says {}", s.values.size(),
                        values_size));
  }
  if (leaf_.max_def == 0 && h.num_nulls != 0)
    corrupt(fmt::format("{} nulls in a REQUIRED column", h.num_nulls));
  return s;
}

// The decoders of a data page's levels and values, by its encoding, and its entry count.
void ParquetLeafReader::start_page_decoders(const ParquetPageHeader& h, const PageStreams& s) {
  const auto fail_here = [this](std::string_view why) { corrupt(why); };
  std::string_view values = s.values;
  def_levels_.reset();
  if (leaf_.max_def > 0)
    def_levels_ = std::make_unique<RleBitPackedDecoder>(
        s.def_levels, bit_width(uint32_t(leaf_.max_def)), fail_here);
  rep_levels_.reset();
  if (leaf_.max_rep > 0)
    rep_levels_ = std::make_unique<RleBitPackedDecoder>(
        s.rep_levels, bit_width(uint32_t(leaf_.max_rep)), fail_here);
  dict_indices_.reset();
  rle_bools_.reset();
  if (h.encoding == kPlain) {
    plain_ = values;
    bool_bit_ = 0;
  } else if (h.encoding == kRle && leaf_.physical_type == kBoolean) {
    // RLE-encoded BOOLEAN values: a 4-byte length, then the hybrid encoding of bit width 1.
    uint32_t n = 0;
    if (values.size() < 4) corrupt("RLE BOOLEAN values without their length");
    std::memcpy(&n, values.data(), 4);
    if (n > values.size() - 4)
      corrupt(fmt::format("RLE BOOLEAN values of {} bytes in {}", n, values.size() - 4));
    rle_bools_ = std::make_unique<RleBitPackedDecoder>(values.substr(4, n), 1, fail_here);
  } else if (h.encoding == kPlainDictionary || h.encoding == kRleDictionary) {
    if (!have_dictionary_) corrupt("a dictionary-encoded page without a dictionary page before it");
    uint32_t width = 0;
    if (!values.empty()) {
      width = uint8_t(values[0]);
      values.remove_prefix(1);
    }
    if (width > 32) corrupt(fmt::format("dictionary indices of bit width {}", width));
    dict_indices_ = std::make_unique<RleBitPackedDecoder>(values, width, fail_here);
  } else {
    refuse(fmt::format("encoding {}", parquet_encoding_name(h.encoding)));
  }
  entries_left_ = h.num_values;
  page_nulls_expected_ = h.type == kDataPageV2 && leaf_.max_rep == 0 ? h.num_nulls : -1;
  page_nulls_seen_ = 0;
}

bool ParquetLeafReader::load_page() {
  for (;;) {
    if (!chunk_open_) {
      if (row_group_ >= file_.metadata().row_groups.size()) return false;
      start_chunk();
      chunk_open_ = true;
    }
    if (chunk_values_left_ == 0 || chunk_pos_ >= chunk_end_) {
      finish_chunk();
      continue;
    }
    uint64_t body_at = 0;
    const ParquetPageHeader h = read_page_header(body_at);
    if (h.type != kDataPage && h.type != kDataPageV2 && h.type != kDictionaryPage)
      continue;  // an index page, or one of a later format version: not ours to read
    if (h.num_values < 0) corrupt("a page header without its value count");
    file_.read_at(body_at, uint64_t(h.compressed_size), raw_, "a page");

    if (h.type == kDictionaryPage) {
      load_dictionary_page(h);
      continue;
    }

    if (h.num_values > chunk_values_left_)
      corrupt(
          fmt::format("a page of {} values where its column chunk has {} left (the sizes "
                      "disagree)",
                      h.num_values, chunk_values_left_));
    chunk_values_left_ -= h.num_values;
    const PageStreams s = h.type == kDataPage ? split_data_page_v1(h) : split_data_page_v2(h);
    start_page_decoders(h, s);
    return true;
  }
}

bool ParquetLeafReader::next_page() {
  while (entries_left_ == 0) {
    if (page_nulls_expected_ >= 0 && page_nulls_seen_ != page_nulls_expected_)
      corrupt(
          fmt::format("a data page v2 with {} nulls in its definition levels, {} in its "
                      "header",
                      page_nulls_seen_, page_nulls_expected_));
    page_nulls_expected_ = -1;
    if (!load_page()) return false;
  }
  return true;
}

bool ParquetLeafReader::read_entry(int& rep, int& def) {
  --entries_left_;
  rep = 0;
  if (rep_levels_) {
    const uint32_t r = rep_levels_->next();
    if (r > uint32_t(leaf_.max_rep))
      corrupt(
          fmt::format("a repetition level of {} past the column's maximum {}", r, leaf_.max_rep));
    rep = int(r);
  }
  def = leaf_.max_def;
  if (def_levels_) {
    const uint32_t d = def_levels_->next();
    if (d > uint32_t(leaf_.max_def))
      corrupt(
          fmt::format("a definition level of {} past the column's maximum {}", d, leaf_.max_def));
    def = int(d);
    if (def < leaf_.max_def) {
      ++page_nulls_seen_;
      return true;
    }
  }
  if (dict_indices_) {
    const uint32_t i = dict_indices_->next();
    if (i >= dict_size_)
      corrupt(fmt::format("dictionary index {} past the dictionary's {} values", i, dict_size_));
    switch (leaf_.physical_type) {
      case kByteArray:
        bytes_ = dict_bytes_values_[i];
        break;
      case kFloat:
      case kDouble:
        f64_ = dict_f64_[i];
        break;
      default:
        i64_ = dict_i64_[i];
    }
  } else if (rle_bools_) {
    i64_ = rle_bools_->next();
  } else {
    read_plain();
  }
  return true;
}

}  // namespace marin::data
