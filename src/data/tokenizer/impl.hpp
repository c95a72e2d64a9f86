#pragma once
// Internal representation shared by tokenizer.cpp (load/save/encode/decode) and train.cpp.
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/limits.hpp"  // kMaxWordBytes
#include "data/tokenizer/pipeline.hpp"
#include "data/tokenizer/split_regex.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace marin {

inline uint64_t bytes_hash(std::string_view s) {
  return XXH3_64bits(s.data(), s.size());
}

// Open-addressing map from token bytes to id. A slot holds the hash, the length and (for tokens
// up to kInline bytes, nearly all of them) the bytes themselves, so a probe costs one cache line.
class BytesIndex {
 public:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  static constexpr size_t kInline = 18;
  void build(const std::vector<std::string>& tokens, const std::vector<uint8_t>& kind,
             uint8_t want) {
    tokens_ = &tokens;
    size_t n = 0;
    for (uint8_t k : kind) n += k == want;
    size_t cap = 16;
    while (cap < 2 * n + 2) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (uint32_t id = 0; id < tokens.size(); ++id) {
      if (kind[id] != want) continue;
      const std::string& t = tokens[id];
      uint64_t h = bytes_hash(t);
      size_t i = h & mask_;
      while (slots_[i].id != kEmpty) i = (i + 1) & mask_;
      Slot& s = slots_[i];
      s.h = h;
      s.id = id;
      s.len = uint16_t(std::min<size_t>(t.size(), 0xFFFF));
      if (t.size() <= kInline) std::memcpy(s.key, t.data(), t.size());
    }
  }
  uint32_t find(std::string_view s, uint64_t h) const {
    if (slots_.empty()) return kEmpty;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& sl = slots_[i];
      if (sl.id == kEmpty) return kEmpty;
      if (sl.h != h) continue;
      if (s.size() <= kInline) {
        if (sl.len == s.size() && std::memcmp(sl.key, s.data(), s.size()) == 0) return sl.id;
      } else if ((*tokens_)[sl.id] == s) {
        return sl.id;
      }
    }
  }
  uint32_t find(std::string_view s) const { return find(s, bytes_hash(s)); }

 private:
  struct alignas(32) Slot {
    uint64_t h = 0;
    uint32_t id = kEmpty;
    uint16_t len = 0;
    char key[kInline] = {};
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  const std::vector<std::string>* tokens_ = nullptr;
};

// Open-addressing map (left id, right id) -> (merge rank, merged id).
class PairIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Hit {
    uint32_t rank, id;
  };
  void build(const std::vector<std::pair<uint32_t, uint32_t>>& merges,
             const std::vector<uint32_t>& results) {
    size_t cap = 16;
    while (cap < 2 * merges.size() + 2) cap <<= 1;
    slots_.assign(cap, Slot{kEmptyKey, 0, 0});
    mask_ = cap - 1;
    for (uint32_t r = 0; r < merges.size(); ++r) {
      uint64_t key = (uint64_t(merges[r].first) << 32) | merges[r].second;
      size_t i = mix(key) & mask_;
      while (slots_[i].key != kEmptyKey && slots_[i].key != key) i = (i + 1) & mask_;
      if (slots_[i].key == key) continue;  // a duplicate merge: the first (lowest rank) wins
      slots_[i] = Slot{key, r, results[r]};
    }
  }
  Hit find(uint32_t a, uint32_t b) const {
    uint64_t key = (uint64_t(a) << 32) | b;
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return {s.rank, s.id};
      if (s.key == kEmptyKey) return {kNone, kNone};
    }
  }

 private:
  static constexpr uint64_t kEmptyKey = ~uint64_t(0);
  static uint64_t mix(uint64_t k) { return (k * 0x9E3779B97F4A7C15ull) >> 20 ^ k; }
  struct Slot {
    uint64_t key;
    uint32_t rank, id;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

enum TokenKind : uint8_t { kAbsent = 0, kNormal = 1, kSpecial = 2 };

// A token of tokenizer.json's added_tokens (or a special token of a rank file / trained
// vocabulary), matched in the text before the model sees it (Hugging Face's AddedVocabulary).
struct AddedToken {
  uint32_t id;
  bool special = true, lstrip = false, rstrip = false, single_word = false;
  bool normalized = false;  // matched in the normalized text instead of the raw text
};

struct Tokenizer::Impl {
  // What defines the tokenizer (and its hash).
  std::string pattern;
  std::vector<std::string> tokens;                    // id -> bytes (special tokens: their text)
  std::vector<uint8_t> kind;                          // id -> TokenKind
  std::vector<std::pair<uint32_t, uint32_t>> merges;  // in priority order (index = rank)
  bool ignore_merges = true;  // a piece that is itself a token is emitted whole (tiktoken rule)
  // The tokenizer.json pipeline around the model. A rank file or a trained vocabulary has none of
  // it: byte-level BPE over `pattern`'s pieces.
  bool byte_level = true;  // vocabulary and initial symbols are bytes (else characters)
  bool keep_gaps = true;   // text between `pattern`'s matches is a piece (Split Isolated)
  std::string pipeline;    // canonical JSON of the parts below that change ids (hashed)
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;  // null: `pattern` (if any) splits
  std::unique_ptr<tok::Decoder> decoder;
  tok::PostProcessor post;
  std::vector<AddedToken> added;  // from tokenizer.json; else derived from kSpecial in finalize
  std::string unk_token, subword_prefix, word_suffix;
  bool fuse_unk = false, byte_fallback = false;

  // Derived by finalize().
  std::unique_ptr<SplitRegex> regex;
  BytesIndex vocab;
  PairIndex pairs;
  std::vector<uint32_t> merge_result;
  std::array<uint32_t, 256> byte_id{};
  std::vector<uint32_t> specials;  // special ids, longest text first
  std::array<bool, 256> special_first{};
  std::vector<const AddedToken*> added_raw, added_norm;  // longest text first
  std::array<bool, 256> raw_first{}, norm_first{};
  uint32_t unk_id = UINT32_MAX;
  std::array<uint32_t, 256> fallback_id{};  // <0xNN> tokens (UINT32_MAX: absent)
  std::optional<uint32_t> bos, eos, pad;
  uint64_t hash = 0;
  uint64_t instance = 0;  // unique per finalize(), keys the per-thread piece cache

  // Builds every derived field; throws marin::Error (prefixed with `origin`) when the vocabulary
  // cannot encode every byte or a merge produces a token that is not in it.
  void finalize(const std::string& origin);
  // For rank files: one merge for every split of a token into two tokens, by the token's rank.
  void derive_merges_from_ranks();
  void index_vocab();
  // Makes room for token `id` (ids index `tokens`). Readers bound ids by their file's size
  // first (max_token_id), so a damaged id cannot size the table.
  void grow_to(uint32_t id) {
    if (id < tokens.size()) return;
    tokens.resize(size_t(id) + 1);
    kind.resize(size_t(id) + 1, kAbsent);
  }
  // The largest id a vocabulary of `entries` tokens may use: ids may leave gaps, but at most as
  // many as there are tokens (memory in proportion to the file; real vocabularies are dense).
  static uint64_t max_token_id(uint64_t entries) { return 2 * entries + 256; }
  void encode_piece(std::string_view piece, std::vector<uint32_t>& out) const;
  void bpe(std::string_view piece, std::vector<uint32_t>& out) const;
  // The model's initial symbols of a piece (bytes, or characters with byte fallback / unk).
  size_t symbols(std::string_view piece, std::vector<uint32_t>& ids) const;
  // Text without added tokens: normalizer, pre-tokenizer, model. `at_start`: the text begins at
  // offset 0 of the input.
  void encode_text(std::string_view text, bool at_start, bool allow_special,
                   std::vector<uint32_t>& out) const;
  // Pieces of `pattern`'s split (the fast pre-tokenizer: a regex split plus ByteLevel).
  void regex_pieces(std::string_view text, std::vector<uint32_t>& out) const;
  // Splits `text` at the added tokens of `set`, calling plain(segment, offset) and emitting ids.
  template <class Plain>
  void split_added(std::string_view text, const std::vector<const AddedToken*>& set,
                   const std::array<bool, 256>& first, bool allow_special,
                   std::vector<uint32_t>& out, Plain&& plain) const;
  bool classic() const;  // no pipeline beyond a byte-level BPE over a split regex
};

}  // namespace marin
