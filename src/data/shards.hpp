#pragma once
// Token shards: the tokenized form of one text shard of the corpus (docs/data.md, "Token shards").
//
//   <TOKDIR>/<domain>/<split>-NNNNN.tok   one per <ROOT>/<domain>/<split>-NNNNN.jsonl
//   <TOKDIR>/manifest.json                domains, splits, documents, tokens, UTF-8 bytes per shard
//
// Byte layout of a .tok file (all little-endian):
//   0   char[8]  magic "MARINTOK"
//   8   u32      format version (1)
//   12  u32      bytes per token: 2 (uint16, vocab ≤ 65536) or 4 (uint32)
//   16  u32      vocab size
//   20  u32      reserved, 0
//   24  u64      tokenizer hash (Tokenizer::hash())
//   32  u64      document count D
//   40  u64      token count T
//   48  u64      UTF-8 bytes of the documents' text
//   56  u64      reserved, 0
//   64  u64[D+1] document offsets in tokens: 0 = off[0] ≤ off[1] ≤ … ≤ off[D] = T
//   64+8(D+1)    T tokens
// The file is exactly 64 + 8(D+1) + T·(bytes per token) long.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace marin {

class Tokenizer;

struct TokenShardHeader {
  static constexpr char kMagic[8] = {'M', 'A', 'R', 'I', 'N', 'T', 'O', 'K'};
  static constexpr uint32_t kVersion = 1;
  static constexpr uint64_t kSize = 64;
  uint32_t version = kVersion;
  uint32_t token_bytes = 2;
  uint32_t vocab_size = 0;
  uint64_t tokenizer_hash = 0;
  uint64_t documents = 0;
  uint64_t tokens = 0;
  uint64_t text_bytes = 0;
};

// Writes a shard atomically (temp file + rename). offsets has documents + 1 entries starting at 0
// and ending at tokens.size(); the token width follows from vocab_size. Every token must be
// < vocab_size.
void write_token_shard(const std::string& path, uint32_t vocab_size, uint64_t tokenizer_hash,
                       uint64_t text_bytes, std::span<const uint64_t> offsets,
                       std::span<const uint32_t> tokens);

// A read-only, memory-mapped token shard.
class TokenShard {
 public:
  // Opens and validates: the file exists and is a regular file, the magic and version, the token
  // width, the size implied by the header against the real size (truncated or trailing bytes),
  // the tokenizer hash (and the vocabulary size when expected_vocab > 0), monotone document
  // offsets, and (unless check_tokens is false) every token < vocab size. Each failure is a
  // marin::Error naming the file and what was expected.
  static TokenShard open(const std::string& path, uint64_t expected_tokenizer_hash,
                         uint32_t expected_vocab = 0, bool check_tokens = true);

  TokenShard() = default;
  ~TokenShard();
  TokenShard(TokenShard&& o) noexcept;
  TokenShard& operator=(TokenShard&& o) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const std::string& path() const { return path_; }
  const TokenShardHeader& header() const { return h_; }
  uint64_t documents() const { return h_.documents; }
  uint64_t tokens() const { return h_.tokens; }
  uint64_t doc_begin(uint64_t d) const { return offsets_[d]; }
  uint64_t doc_size(uint64_t d) const { return offsets_[d + 1] - offsets_[d]; }
  uint32_t token(uint64_t i) const {
    return h_.token_bytes == 2 ? reinterpret_cast<const uint16_t*>(tokens_)[i]
                               : reinterpret_cast<const uint32_t*>(tokens_)[i];
  }
  // Copies tokens [begin, begin + n) as int32.
  void copy(uint64_t begin, uint64_t n, int32_t* out) const;
  // Tokens of document d (for tests and tools).
  std::vector<uint32_t> document(uint64_t d) const;

 private:
  std::string path_;
  TokenShardHeader h_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const uint64_t* offsets_ = nullptr;
  const uint8_t* tokens_ = nullptr;
};

// One entry of TOKDIR/manifest.json.
struct TokenShardInfo {
  std::string file;  // relative to the token directory: "<domain>/<split>-NNNNN.tok"
  std::string domain;
  std::string split;  // "train" or "valid"
  uint64_t documents = 0;
  uint64_t tokens = 0;
  uint64_t bytes = 0;  // UTF-8 bytes of the documents' text (for bits per byte)
};

// One shard's manifest entry: {"file", "domain", "split", "documents", "tokens", "bytes"}.
nlohmann::json to_json(const TokenShardInfo& s);

struct TokenManifest {
  static constexpr const char* kFormat = "marin-tokens/1";
  std::string dir;  // the token directory (not stored in the file)
  uint64_t tokenizer_hash = 0;
  uint32_t vocab_size = 0;
  std::string corpus;  // the text corpus it was made from (informational)
  std::vector<TokenShardInfo> shards;
  // `marin tokenize --in`: every source file (path, size, xxh64, format, documents) and the
  // documents passed over, counted by reason. Empty for `--corpus`.
  nlohmann::json sources = nlohmann::json::array();
  std::map<std::string, uint64_t> skipped;

  // Reads <dir>/manifest.json; marin::Error naming the file on a missing file or field, a shard
  // path outside the directory (absolute or with '..'), a shard listed twice, or an unknown split.
  static TokenManifest load(const std::string& dir);
  // Opens one of its shards (TokenShard::open) and cross-checks the shard's header against the
  // manifest: the vocabulary size, and the documents, tokens and bytes listed for it.
  TokenShard open(const TokenShardInfo& s, uint64_t expected_tokenizer_hash,
                  uint32_t expected_vocab = 0, bool check_tokens = true) const;
  nlohmann::json to_json() const;
  std::vector<std::string> domains() const;  // sorted, unique
  // Shards of one domain and split, in file order.
  std::vector<TokenShardInfo> find(const std::string& domain, const std::string& split) const;
  std::string path(const TokenShardInfo& s) const;  // dir/file
};

// A file named in a manifest must stay inside the manifest's directory: relative, and without a
// '..' component. marin::Error naming `where` (the manifest) and the path otherwise.
void check_manifest_path(const std::string& file, const std::string& where);

struct TokenizeOptions {
  std::string corpus;  // <ROOT> with <domain>/<split>-NNNNN.jsonl
  std::string out;     // TOKDIR
  std::vector<std::string> splits = {"train", "valid"};
  int threads = 2;
  bool progress = true;  // a progress bar on stderr when it is a terminal
  bool verify = true;    // check each text shard against the corpus manifest's xxh64
};

// A document as token shards (and `marin rows`) store it: its text's ids, then EOS if the
// tokenizer has one. Appends to out.
void encode_document(const Tokenizer& tok, std::string_view text, std::vector<uint32_t>& out);

// The shards of an existing TOKDIR/manifest.json that a run writing only `splits` keeps: those of
// the other splits, when the manifest was made with the same tokenizer (empty otherwise, or
// when there is no manifest). A run of `--split valid` so never drops the train shards.
std::vector<TokenShardInfo> kept_shards(const std::string& out, const Tokenizer& tok,
                                        const std::vector<std::string>& splits);

// Tokenizes every text shard of the corpus (each document as encode_document makes it), writes one
// token shard per text shard and TOKDIR/manifest.json, and returns the manifest. marin::Error
// naming the file and line on unreadable or malformed input.
TokenManifest tokenize_corpus(const Tokenizer& tok, const TokenizeOptions& opts);

}  // namespace marin
