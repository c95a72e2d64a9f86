#pragma once
// safetensors (formats.md): 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}},
// then the raw little-endian data. The writer emits F32 (or given bytes of another dtype),
// atomically, with the header padded by
// spaces so the data starts at a multiple of 8 (as the reference implementation does). The reader
// accepts F32, F16, BF16 and F64 (converted to float) and validates everything, naming the file and
// the tensor in every error.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace marin {

using SafetensorsMetadata = std::map<std::string, std::string>;

// One tensor to write: row-major float32 data of prod(shape) elements (shape [] is a scalar), or
// with another dtype ("BF16", "F16", "F64") its little-endian bytes, prod(shape) × width long.
struct TensorView {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
  std::string dtype = "F32";
  std::string_view bytes = {};
};

// The header bytes (length prefix + padded JSON) for these tensors, tensors laid out back to back
// in the given order. Exposed for tests; write_safetensors uses it.
std::string safetensors_header(std::span<const TensorView> tensors,
                               const SafetensorsMetadata& metadata);

// Writes the file atomically (write_file_atomic). Throws marin::Error naming the file on duplicate
// or empty names, negative dimensions, a null data pointer with elements, or an I/O failure.
void write_safetensors(const std::string& path, std::span<const TensorView> tensors,
                       const SafetensorsMetadata& metadata = {});

struct Tensor {
  std::string dtype;  // as stored in the file ("F32", "BF16", ...); data is float either way
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

struct SafetensorsFile {
  std::string path;                // for error messages
  std::vector<std::string> names;  // in data order
  std::map<std::string, Tensor> tensors;
  SafetensorsMetadata metadata;

  bool contains(std::string_view name) const { return tensors.count(std::string(name)) != 0; }
  // The tensor, or marin::Error "<path>: no tensor '<name>'".
  const Tensor& at(std::string_view name) const;
  // Same, and its shape must equal `shape` (error names file, tensor, expected and actual shape).
  const Tensor& at(std::string_view name, std::span<const int64_t> shape) const;
};

// Parses and validates a whole file's bytes; `path` is only used in error messages.
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path);
SafetensorsFile read_safetensors(const std::string& path);

}  // namespace marin
