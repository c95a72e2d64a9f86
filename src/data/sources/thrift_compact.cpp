#include "data/sources/thrift_compact.hpp"

#include <fmt/core.h>

#include "core/error.hpp"

namespace marin::data {

namespace {
constexpr int kMaxDepth = 64;
}

ThriftCompactReader::ThriftCompactReader(std::string_view bytes, uint64_t base_offset,
                                         std::string what)
    : bytes_(bytes), base_(base_offset), what_(std::move(what)) {}

void ThriftCompactReader::corrupt(std::string_view why) const {
  fail("{}: corrupt Thrift compact structure at byte offset {}: {}", what_, offset(), why);
}

uint8_t ThriftCompactReader::read_byte() {
  if (pos_ >= bytes_.size()) corrupt("ends early (truncated)");
  return static_cast<uint8_t>(bytes_[pos_++]);
}

uint64_t ThriftCompactReader::read_varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const uint8_t b = read_byte();
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  corrupt("a varint longer than 10 bytes");
}

int32_t ThriftCompactReader::read_i32() {
  const uint64_t u = read_varint();
  if (u > 0xffffffffu) corrupt(fmt::format("an i32 varint out of range ({})", u));
  const uint32_t v = static_cast<uint32_t>(u);
  return static_cast<int32_t>((v >> 1) ^ (~(v & 1) + 1));
}

int64_t ThriftCompactReader::read_i64() {
  const uint64_t v = read_varint();
  return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
}

bool ThriftCompactReader::read_bool(ThriftType field_type) {
  if (field_type == ThriftType::BoolTrue) return true;
  if (field_type == ThriftType::BoolFalse) return false;
  corrupt(fmt::format("a bool field with type code {}", int(field_type)));
}

std::string_view ThriftCompactReader::read_binary() {
  const uint64_t n = read_varint();
  if (n > bytes_.size() - pos_)
    corrupt(fmt::format("a {}-byte string past the structure's end ({} bytes left)", n,
                        bytes_.size() - pos_));
  const std::string_view s = bytes_.substr(pos_, n);
  pos_ += n;
  return s;
}

void ThriftCompactReader::begin_struct() {
  if (depth_ >= kMaxDepth) corrupt("structs nested more than 64 deep");
  last_ids_[++depth_] = 0;
}

void ThriftCompactReader::end_struct() {
  if (depth_ > 0) --depth_;
}

bool ThriftCompactReader::next_field(int16_t& id, ThriftType& type) {
  const uint8_t header = read_byte();
  const uint8_t t = header & 0x0f;
  if (t == 0) return false;
  if (t > 12) corrupt(fmt::format("unknown field type code {}", t));
  type = static_cast<ThriftType>(t);
  const uint8_t delta = header >> 4;
  if (delta != 0) {
    id = static_cast<int16_t>(last_ids_[depth_] + delta);
  } else {
    const int32_t full = read_i32();
    if (full < -32768 || full > 32767) corrupt(fmt::format("field id {} out of range", full));
    id = static_cast<int16_t>(full);
  }
  last_ids_[depth_] = id;
  return true;
}

uint32_t ThriftCompactReader::begin_list(ThriftType& element_type) {
  const uint8_t header = read_byte();
  uint64_t n = header >> 4;
  if (n == 15) n = read_varint();
  const uint8_t t = header & 0x0f;
  if (t == 0 || t > 12) corrupt(fmt::format("unknown list element type code {}", t));
  element_type = static_cast<ThriftType>(t);
  if (n > bytes_.size() - pos_)
    corrupt(fmt::format("a list of {} elements in {} bytes", n, bytes_.size() - pos_));
  return static_cast<uint32_t>(n);
}

void ThriftCompactReader::skip(ThriftType type, int depth) {
  if (depth > kMaxDepth) corrupt("values nested more than 64 deep");
  switch (type) {
    case ThriftType::BoolTrue:
    case ThriftType::BoolFalse:
      return;  // a struct field's bool is in its header
    case ThriftType::Byte:
      read_byte();
      return;
    case ThriftType::I16:
    case ThriftType::I32:
    case ThriftType::I64:
      read_varint();
      return;
    case ThriftType::Double:
      if (bytes_.size() - pos_ < 8) corrupt("ends inside a double");
      pos_ += 8;
      return;
    case ThriftType::Binary:
      read_binary();
      return;
    case ThriftType::List:
    case ThriftType::Set: {
      ThriftType et;
      const uint32_t n = begin_list(et);
      for (uint32_t i = 0; i < n; ++i) {
        // A bool element is one byte (its value), unlike a struct field's bool.
        if (et == ThriftType::BoolTrue || et == ThriftType::BoolFalse)
          read_byte();
        else
          skip(et, depth + 1);
      }
      return;
    }
    case ThriftType::Map: {
      const uint64_t n = read_varint();
      if (n == 0) return;
      if (n > bytes_.size() - pos_) corrupt(fmt::format("a map of {} entries", n));
      const uint8_t kv = read_byte();
      const uint8_t k = kv >> 4, v = kv & 0x0f;
      if (k == 0 || k > 12 || v == 0 || v > 12) corrupt("unknown map key/value type code");
      for (uint64_t i = 0; i < n; ++i) {
        for (const uint8_t t : {k, v}) {
          if (t <= 2)
            read_byte();
          else
            skip(static_cast<ThriftType>(t), depth + 1);
        }
      }
      return;
    }
    case ThriftType::Struct: {
      begin_struct();
      int16_t id;
      ThriftType ft;
      while (next_field(id, ft)) skip(ft, depth + 1);
      end_struct();
      return;
    }
    case ThriftType::Stop:
      break;
  }
  corrupt(fmt::format("cannot skip type code {}", int(type)));
}

}  // namespace marin::data
