#pragma once
// Export of a marin.cpp model checkpoint to the Hugging Face layout (docs/export.md) and back:
//
//   DIR/config.json               architectures, model_type "marin", auto_map, every recipe field,
//                                 bos/eos/pad ids, torch_dtype
//   DIR/model.safetensors         metadata {"format": "pt"}, PyTorch names and layout (nn.Linear
//                                 weights [out, in]); past max_shard_bytes model-0000k-of-0000n
//                                 .safetensors + model.safetensors.index.json
//   DIR/tokenizer.json            the HF tokenizers layout, + tokenizer_config.json
//   DIR/generation_config.json
//   DIR/modeling_marin.py         python/modeling_marin.py, embedded in the binary at build time
//
// export → import → export is byte-identical (tests/export/test_hf_export.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace marin::hf {

// Where a marin tensor (formats.md name) lives in the export: its PyTorch name, and whether it is
// stored transposed (a [in, out] matrix applied as y = x @ W becomes nn.Linear's [out, in]).
struct TensorName {
  std::string name;
  bool transpose = false;
};
// Throws marin::Error naming the tensor when it has no mapping.
TensorName hf_name(const std::string& marin_name);

struct ExportOptions {
  std::string dtype = "fp32";               // fp32 or bf16
  int64_t max_shard_bytes = 5'000'000'000;  // Hugging Face's default shard size (5 GB)
  std::string tokenizer;                    // "" → CHECKPOINT/tokenizer.json when present
  // A finite fp32 weight beyond bf16's range (|x| ≥ 2^128 − 2^119, which rounds to inf): an
  // error naming the tensor ("error"), or the largest finite bf16 of its sign ("saturate").
  std::string bf16_overflow = "error";
};

// What an export wrote (for the CLI's summary and the tests).
struct ExportSummary {
  std::vector<std::string> files;  // relative to the output directory
  int64_t tensors = 0, shards = 0, bytes = 0;
  bool tokenizer = false;
};

ExportSummary export_hf(const std::string& checkpoint, const std::string& out,
                        const ExportOptions& o);
// Reads an export back into a marin checkpoint directory (config.json + model.safetensors
// [+ tokenizer.json]). Every tensor of the config must be present with its shape, and nothing
// else; a bf16 export imports exactly (bf16 → fp32 is exact).
void import_hf(const std::string& dir, const std::string& out);

// The text of python/modeling_marin.py as built into this binary.
const std::string& modeling_source();

}  // namespace marin::hf
