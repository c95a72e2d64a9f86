#pragma once
// The parts of a Hugging Face tokenizer.json pipeline around the BPE model: normalizers,
// pre-tokenizers, post-processors and decoders, each parsed from its JSON object. Semantics follow
// the Rust crate huggingface/tokenizers (src/normalizers, pre_tokenizers, processors, decoders);
// anything else is refused with its JSON path and value. Only ids matter here (no offsets).
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace marin::tok {

using nlohmann::json;

// Components nest (Sequence inside Sequence); deeper than this is refused, naming the path, so a
// hostile file cannot overflow the stack of the recursive parse.
constexpr int kMaxNesting = 32;

// `path: "value" is not supported` (the message of every refusal of a component or option).
[[noreturn]] void unsupported(const std::string& path, const json& value);
// Checks the nesting depth of a component at `path`.
void check_depth(const std::string& path, int depth);

// ---- normalizers ----
struct Normalizer {
  virtual ~Normalizer() = default;
  virtual void apply(std::string& s) const = 0;
  // True when the normalizer leaves every pure-ASCII string unchanged (the encoder then skips it
  // on ASCII text: no second pass).
  virtual bool ascii_identity() const = 0;
};
std::unique_ptr<Normalizer> parse_normalizer(const json& j, const std::string& path, int depth = 0);

// ---- pre-tokenizers ----
struct Piece {
  std::string text;
  bool at_start;  // starts at offset 0 of the original input (Metaspace's prepend_scheme "first")
};
struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  // Appends the non-empty pieces `in` splits into to `out`.
  virtual void split(Piece&& in, std::vector<Piece>& out) const = 0;
};
struct PreTokenizerInfo {
  bool byte_level = false;  // a ByteLevel step: the model's vocabulary is GPT-2 byte-mapped
};
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const json& j, const std::string& path,
                                                  PreTokenizerInfo& info, int depth = 0);

// ---- post-processors (single sequence: prefix ids + the ids + suffix ids) ----
struct PostProcessor {
  std::vector<uint32_t> prefix, suffix;
};
PostProcessor parse_post_processor(const json& j, const std::string& path, int depth = 0);

// ---- decoders (on the tokens' text, as decode_chain in the Rust crate) ----
struct Decoder {
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
std::unique_ptr<Decoder> parse_decoder(const json& j, const std::string& path, int depth = 0);

}  // namespace marin::tok
