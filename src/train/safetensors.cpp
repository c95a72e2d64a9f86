// safetensors reader and writer (see safetensors.hpp).
#include "train/safetensors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "core/limits.hpp"

namespace marin {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader assumes a little-endian host");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit

// Element count of a shape, or -1 on a negative dimension or overflow past int64.
int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / 8 / d) return -1;
    n *= d;
  }
  return n;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal half: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

int dtype_size(std::string_view dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "F64") return 8;
  return 0;
}

}  // namespace

std::string safetensors_header(std::span<const TensorView> tensors,
                               const SafetensorsMetadata& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    h["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const TensorView& t : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(checked_numel(t.shape)) * dtype_size(t.dtype);
    h[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = h.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  return out + json;
}

void write_safetensors(const std::string& path, std::span<const TensorView> tensors,
                       const SafetensorsMetadata& metadata) {
  std::set<std::string_view> seen;
  for (const TensorView& t : tensors) {
    MARIN_CHECK(!t.name.empty(), "cannot write {}: a tensor has an empty name", path);
    MARIN_CHECK(t.name != "__metadata__", "cannot write {}: '__metadata__' is not a tensor name",
                path);
    MARIN_CHECK(seen.insert(t.name).second, "cannot write {}: tensor '{}' appears twice", path,
                t.name);
    const int64_t n = checked_numel(t.shape);
    MARIN_CHECK(n >= 0, "cannot write {}: tensor '{}' has an invalid shape [{}]", path, t.name,
                fmt::join(t.shape, ", "));
    const int width = dtype_size(t.dtype);
    MARIN_CHECK(width > 0,
                "cannot write {}: tensor '{}' has dtype '{}' (expected F32, F16, BF16 or F64)",
                path, t.name, t.dtype);
    if (t.dtype == "F32" && t.bytes.empty())
      MARIN_CHECK(n == 0 || t.data != nullptr, "cannot write {}: tensor '{}' has no data", path,
                  t.name);
    else
      MARIN_CHECK(t.bytes.size() == size_t(n) * size_t(width),
                  "cannot write {}: tensor '{}' has {} bytes of {}, expected {} × {}", path, t.name,
                  t.bytes.size(), t.dtype, n, width);
  }
  const std::string header = safetensors_header(tensors, metadata);
  std::vector<std::string_view> parts;
  parts.reserve(tensors.size() + 1);
  parts.emplace_back(header);
  for (const TensorView& t : tensors)
    parts.push_back(!t.bytes.empty() || t.dtype != "F32"
                        ? t.bytes
                        : std::string_view(reinterpret_cast<const char*>(t.data),
                                           static_cast<size_t>(checked_numel(t.shape)) * 4));
  write_file_atomic(path, parts);
}

namespace {

// The header's __metadata__: string values only.
void read_metadata(const nlohmann::json& v, const std::string& path, SafetensorsFile& f) {
  MARIN_CHECK(v.is_object(), "{}: __metadata__ is not a JSON object", path);
  for (auto m = v.begin(); m != v.end(); ++m) {
    MARIN_CHECK(m.value().is_string(), "{}: __metadata__ value '{}' is not a string", path,
                m.key());
    f.metadata[m.key()] = m.value().get<std::string>();
  }
}

// One tensor's header entry, checked: a dtype we read, a shape, and data_offsets that hold
// exactly the shape's bytes within the file's `data`.
Entry parse_tensor_entry(const std::string& name, const nlohmann::json& v, std::string_view data,
                         const std::string& path) {
  MARIN_CHECK(v.is_object(), "{}: tensor '{}': header entry is not an object", path, name);
  Entry e;
  e.name = name;
  MARIN_CHECK(v.contains("dtype") && v["dtype"].is_string(),
              "{}: tensor '{}': missing or non-string dtype", path, name);
  e.dtype = v["dtype"].get<std::string>();
  MARIN_CHECK(dtype_size(e.dtype) != 0,
              "{}: tensor '{}': dtype {} not supported (F32, F16, BF16, F64 are)", path, name,
              e.dtype);
  MARIN_CHECK(v.contains("shape") && v["shape"].is_array(), "{}: tensor '{}': missing shape", path,
              name);
  for (const auto& d : v["shape"]) {
    MARIN_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0,
                "{}: tensor '{}': shape {} has a dimension that is not a non-negative integer",
                path, name, v["shape"].dump());
    e.shape.push_back(d.get<int64_t>());
  }
  MARIN_CHECK(v.contains("data_offsets") && v["data_offsets"].is_array() &&
                  v["data_offsets"].size() == 2 && v["data_offsets"][0].is_number_unsigned() &&
                  v["data_offsets"][1].is_number_unsigned(),
              "{}: tensor '{}': data_offsets must be two non-negative integers", path, name);
  e.begin = v["data_offsets"][0].get<uint64_t>();
  e.end = v["data_offsets"][1].get<uint64_t>();
  MARIN_CHECK(e.begin <= e.end, "{}: tensor '{}': data_offsets [{}, {}] end before they begin",
              path, name, e.begin, e.end);
  const int64_t numel = checked_numel(e.shape);
  MARIN_CHECK(numel >= 0, "{}: tensor '{}': shape [{}] is too large", path, name,
              fmt::join(e.shape, ", "));
  const uint64_t want = static_cast<uint64_t>(numel) * dtype_size(e.dtype);
  MARIN_CHECK(e.end - e.begin == want,
              "{}: tensor '{}': data_offsets [{}, {}] hold {} bytes but shape [{}] of {} needs {}",
              path, name, e.begin, e.end, e.end - e.begin, fmt::join(e.shape, ", "), e.dtype, want);
  MARIN_CHECK(e.end <= data.size(),
              "{}: tensor '{}': data_offsets [{}, {}] run past the end of the data ({} bytes): "
              "the file is truncated or the offsets are wrong",
              path, name, e.begin, e.end, data.size());
  return e;
}

// The reference layout: tensors back to back from offset 0 to the end of the file. Sorts
// `entries` by offset.
void check_layout(std::vector<Entry>& entries, std::string_view data, const std::string& path) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < pos)
      fail("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", path, prev->name, prev->begin,
           prev->end, e.name, e.begin, e.end);
    MARIN_CHECK(e.begin == pos, "{}: tensor '{}': data_offsets [{}, {}] leave a gap after byte {}",
                path, e.name, e.begin, e.end, pos);
    pos = e.end;
    prev = &e;
  }
  MARIN_CHECK(pos == data.size(),
              "{}: {} bytes of data after the last tensor (tensors end at {}, data is {} bytes)",
              path, data.size() - pos, pos, data.size());
}

// A tensor's data converted to float.
Tensor decode_tensor(const Entry& e, std::string_view data) {
  Tensor t;
  t.dtype = e.dtype;
  t.shape = e.shape;
  const size_t numel = static_cast<size_t>(checked_numel(e.shape));
  t.data.resize(numel);
  const char* src = data.data() + e.begin;
  if (e.dtype == "F32") {
    if (numel) std::memcpy(t.data.data(), src, numel * 4);
  } else if (e.dtype == "F64") {
    for (size_t i = 0; i < numel; ++i) {
      double d;
      std::memcpy(&d, src + 8 * i, 8);
      t.data[i] = static_cast<float>(d);
    }
  } else {
    const bool bf16 = e.dtype == "BF16";
    for (size_t i = 0; i < numel; ++i) {
      uint16_t u;
      std::memcpy(&u, src + 2 * i, 2);
      t.data[i] = bf16 ? std::bit_cast<float>(static_cast<uint32_t>(u) << 16) : half_to_float(u);
    }
  }
  return t;
}

}  // namespace

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path) {
  SafetensorsFile f;
  f.path = path;
  MARIN_CHECK(bytes.size() >= 8,
              "{}: not a safetensors file: {} bytes, too short for the 8-byte header length", path,
              bytes.size());
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  MARIN_CHECK(n <= bytes.size() - 8,
              "{}: header length {} runs past the end of the file ({} bytes): truncated or not a "
              "safetensors file",
              path, n, bytes.size());
  MARIN_CHECK(n <= kMaxHeaderBytes, "{}: header length {} exceeds the {}-byte limit", path, n,
              kMaxHeaderBytes);
  const std::string_view header_text = bytes.substr(8, n);
  const std::string_view data = bytes.substr(8 + n);

  // The project's one JSON policy: a tensor named twice (a duplicate key, which would silently
  // keep the last one) and deep nesting are refused while parsing.
  const nlohmann::json h = parse_json(header_text, path, "the safetensors header");
  MARIN_CHECK(h.is_object(), "{}: the header is not a JSON object", path);

  const size_t tensors = h.size() - (h.contains("__metadata__") ? 1 : 0);
  MARIN_CHECK(tensors <= kMaxSafetensorsEntries,
              "{}: the header lists {} tensors, more than the limit of {}", path, tensors,
              kMaxSafetensorsEntries);
  std::vector<Entry> entries;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      read_metadata(v, path, f);
      continue;
    }
    entries.push_back(parse_tensor_entry(name, v, data, path));
  }

  check_layout(entries, data, path);
  for (const Entry& e : entries) {
    f.names.push_back(e.name);
    f.tensors.emplace(e.name, decode_tensor(e, data));
  }
  return f;
}

SafetensorsFile read_safetensors(const std::string& path) {
  return parse_safetensors(read_file(path), path);
}

const Tensor& SafetensorsFile::at(std::string_view name) const {
  auto it = tensors.find(std::string(name));
  if (it == tensors.end()) fail("{}: no tensor '{}'", path, name);
  return it->second;
}

const Tensor& SafetensorsFile::at(std::string_view name, std::span<const int64_t> shape) const {
  const Tensor& t = at(name);
  MARIN_CHECK(std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end()),
              "{}: tensor '{}' has shape [{}], expected [{}]", path, name, fmt::join(t.shape, ", "),
              fmt::join(shape, ", "));
  return t;
}

}  // namespace marin
