#pragma once
// Byte-level BPE tokenizer with rank-ordered merges (as tiktoken and Hugging Face `tokenizers`
// apply them), split-regex pre-tokenization through PCRE2 and special tokens that are only
// recognised in text when the caller asks for it. See docs/tokenizer.md.
//
//   auto tok = marin::Tokenizer::load("cl100k_base.tiktoken");   // or a tokenizer.json
//   std::vector<uint32_t> ids = tok.encode("hello world");
//   std::string back = tok.decode(ids);                          // == "hello world", any bytes
//
// encode/decode are const and thread-safe (the piece cache and regex state are per thread).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace marin {

class Tokenizer {
 public:
  // The GPT-4 (cl100k_base) split regex; Llama 3's tokenizer.json carries the identical string.
  static const char* const kCl100kPattern;
  static const char* const kO200kPattern;
  static const char* const kGpt2Pattern;  // r50k/p50k/GPT-2
  // Default special tokens of a trained vocabulary, in this order: BOS, EOS, PAD.
  static std::vector<std::string> default_specials();

  Tokenizer();
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Reads a `.tiktoken` rank file (lines "<base64 bytes> <rank>") or a Hugging Face
  // `tokenizer.json` (the BPE model with its normalizer, pre-tokenizer, added tokens,
  // post-processor and decoder; docs/tokenizer.md); detected from the content.
  // A .tiktoken file carries no regex: `pattern` (cl100k, o200k, p50k, r50k, gpt2 or a regex),
  // else a sidecar FILE.json {"pattern": ..., "special_tokens": {text: id}}, else a file name
  // that starts with a known encoding's name; anything else is an error (never a guess).
  // Throws marin::Error naming the file on any problem.
  static Tokenizer load(const std::string& path, const std::string& pattern = "");
  static Tokenizer from_tiktoken(const std::string& path, const std::string& pattern = "");
  static Tokenizer from_json(const std::string& path);
  static Tokenizer from_json_text(const std::string& text, const std::string& origin = "<string>");

  // Byte-level BPE training. Ids 0..255 are the bytes, then one id per merge, then the special
  // tokens (the first three are taken as BOS, EOS, PAD when named as in default_specials()).
  // vocab_size counts everything; training stops early if no pair is left to merge.
  static Tokenizer train(const std::vector<std::string>& documents, uint32_t vocab_size,
                         const std::vector<std::string>& specials = default_specials(),
                         const std::string& pattern = kCl100kPattern);

  // Writes an HF-compatible tokenizer.json (atomically: temp file + rename).
  void save_json(const std::string& path) const;
  std::string to_json() const;

  // Special tokens are matched in `text` only with allow_special; otherwise they are plain text.
  std::vector<uint32_t> encode(std::string_view text, bool allow_special = false) const;
  void encode_into(std::string_view text, std::vector<uint32_t>& out,
                   bool allow_special = false) const;
  // A document as the model expects it: the post-processor's template around encode()'s ids
  // (Llama 2/Gemma's BOS first, for example); special-token text in `text` stays text.
  std::vector<uint32_t> encode_document(std::string_view text) const;
  const std::vector<uint32_t>& template_prefix() const;  // ids the template puts before the text
  const std::vector<uint32_t>& template_suffix() const;  // and after it
  // Inverse of encode: byte-exact for a byte-level vocabulary; through the tokenizer.json's
  // decoder otherwise (giving the normalized text). Throws marin::Error on an unknown id.
  std::string decode(std::span<const uint32_t> ids) const;
  void decode_into(std::span<const uint32_t> ids, std::string& out) const;

  uint32_t vocab_size() const;  // largest id + 1 (holes count; specials included)
  uint32_t num_merges() const;
  std::optional<uint32_t> bos() const;
  std::optional<uint32_t> eos() const;
  std::optional<uint32_t> pad() const;
  // Stable xxh64 of pattern, tokens (ids, bytes, special flags), merges and the merge mode.
  uint64_t hash() const;
  const std::string& pattern() const;
  bool has_token(uint32_t id) const;
  bool is_special(uint32_t id) const;
  std::string_view token_bytes(uint32_t id) const;                 // throws on an unknown id
  std::optional<uint32_t> token_id(std::string_view bytes) const;  // normal or special token
  // Pre-tokenization alone (the pieces that BPE sees), for tests and tools.
  std::vector<std::string_view> split(std::string_view text) const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace marin
