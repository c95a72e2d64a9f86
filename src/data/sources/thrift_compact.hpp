// A decoder of the Thrift compact protocol, as much as Parquet's footer and page headers need
// (parquet_file.cpp). Every read is checked against the end of the buffer: a truncated or corrupt
// structure is a marin::Error naming `what` (the file and the structure) and the byte offset,
// never a read past the end, an unbounded allocation or unbounded recursion.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace marin::data {

// The compact protocol's type codes (low nibble of a field header, element type of a list).
enum class ThriftType : uint8_t {
  Stop = 0,
  BoolTrue = 1,
  BoolFalse = 2,
  Byte = 3,
  I16 = 4,
  I32 = 5,
  I64 = 6,
  Double = 7,
  Binary = 8,
  List = 9,
  Set = 10,
  Map = 11,
  Struct = 12,
};

class ThriftCompactReader {
 public:
  // `bytes` holds the encoded structure; offsets in errors count from `base_offset` (the
  // structure's position in the file). `what` names the file and the structure.
  ThriftCompactReader(std::string_view bytes, uint64_t base_offset, std::string what);

  // Struct fields: begin_struct() before the first, next_field() until it returns false (the
  // struct's STOP), end_struct() after. Unknown fields are passed to skip().
  void begin_struct();
  bool next_field(int16_t& id, ThriftType& type);
  void end_struct();

  // A list or set header: the element type and count (the count checked against the bytes left,
  // since every element takes at least one byte).
  uint32_t begin_list(ThriftType& element_type);

  int32_t read_i32();
  int64_t read_i64();
  bool read_bool(ThriftType field_type);  // a struct field's bool lives in its type code
  std::string_view read_binary();

  // Skips a value of `type` (nested at most 64 levels deep).
  void skip(ThriftType type, int depth = 0);

  uint64_t offset() const { return base_ + pos_; }  // in the file
  size_t consumed() const { return pos_; }

  [[noreturn]] void corrupt(std::string_view why) const;

 private:
  uint8_t read_byte();
  uint64_t read_varint();

  std::string_view bytes_;
  size_t pos_ = 0;
  uint64_t base_;
  std::string what_;
  // The last field id of each open struct (field ids are deltas from it).
  int16_t last_ids_[65] = {};
  int depth_ = 0;
};

}  // namespace marin::data
