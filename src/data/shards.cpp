// Token shards: writer, memory-mapped reader with validation, manifest, and the corpus tokenizer
// behind `marin tokenize` (see shards.hpp and docs/data.md).
#include "data/shards.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
#include "core/progress.hpp"
#include "data/corpus/corpus.hpp"
#include "data/text_corpus.hpp"
#include "data/tokenizer/tokenizer.hpp"

static_assert(std::endian::native == std::endian::little, "token shards are little-endian");

namespace marin {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

template <class T>
void put(std::string& buf, size_t at, T v) {
  std::memcpy(buf.data() + at, &v, sizeof(T));
}
template <class T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

uint64_t parse_hex(const json& j, const std::string& where) {
  if (!j.is_string()) fail("{}: tokenizer_hash must be a 16-digit hex string", where);
  const std::string s = j.get<std::string>();
  if (s.empty() || s.size() > 16 || s.find_first_not_of("0123456789abcdefABCDEF") != s.npos)
    fail("{}: tokenizer_hash '{}' is not a 16-digit hex string", where, s);
  return std::stoull(s, nullptr, 16);
}

}  // namespace

void check_manifest_path(const std::string& file, const std::string& where) {
  const fs::path p(file);
  if (file.empty() || p.is_absolute())
    fail("{}: shard path '{}' must be relative to the manifest's directory", where, file);
  for (const fs::path& part : p)
    if (part == "..")
      fail("{}: shard path '{}' leaves the manifest's directory ('..')", where, file);
}

// ---- writer -------------------------------------------------------------------------------------

void write_token_shard(const std::string& path, uint32_t vocab_size, uint64_t tokenizer_hash,
                       uint64_t text_bytes, std::span<const uint64_t> offsets,
                       std::span<const uint32_t> tokens) {
  MARIN_CHECK(!offsets.empty() && offsets.front() == 0 && offsets.back() == tokens.size(),
              "{}: document offsets must start at 0 and end at the token count {}", path,
              tokens.size());
  MARIN_CHECK(vocab_size > 0, "{}: vocab size must be positive", path);
  const uint32_t width = vocab_size <= 65536 ? 2 : 4;
  std::string header(TokenShardHeader::kSize, '\0');
  std::memcpy(header.data(), TokenShardHeader::kMagic, 8);
  put<uint32_t>(header, 8, TokenShardHeader::kVersion);
  put<uint32_t>(header, 12, width);
  put<uint32_t>(header, 16, vocab_size);
  put<uint64_t>(header, 24, tokenizer_hash);
  put<uint64_t>(header, 32, offsets.size() - 1);
  put<uint64_t>(header, 40, tokens.size());
  put<uint64_t>(header, 48, text_bytes);
  std::string body;
  if (width == 2) {
    body.resize(tokens.size() * 2);
    auto* out = reinterpret_cast<uint16_t*>(body.data());
    for (size_t i = 0; i < tokens.size(); ++i) {
      MARIN_CHECK(tokens[i] < vocab_size, "{}: token {} at {} is outside the vocabulary of {}",
                  path, tokens[i], i, vocab_size);
      out[i] = static_cast<uint16_t>(tokens[i]);
    }
  } else {
    for (size_t i = 0; i < tokens.size(); ++i)
      MARIN_CHECK(tokens[i] < vocab_size, "{}: token {} at {} is outside the vocabulary of {}",
                  path, tokens[i], i, vocab_size);
    body.assign(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 4);
  }
  const std::string_view parts[] = {
      header,
      {reinterpret_cast<const char*>(offsets.data()), offsets.size() * sizeof(uint64_t)},
      body};
  write_file_atomic(path, parts);
}

// ---- reader -------------------------------------------------------------------------------------

TokenShard::~TokenShard() {
  if (map_) ::munmap(map_, map_size_);
}

TokenShard::TokenShard(TokenShard&& o) noexcept {
  *this = std::move(o);
}

TokenShard& TokenShard::operator=(TokenShard&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(map_, map_size_);
    path_ = std::move(o.path_);
    h_ = o.h_;
    map_ = std::exchange(o.map_, nullptr);
    map_size_ = std::exchange(o.map_size_, 0);
    offsets_ = std::exchange(o.offsets_, nullptr);
    tokens_ = std::exchange(o.tokens_, nullptr);
  }
  return *this;
}

TokenShard TokenShard::open(const std::string& path, uint64_t expected_hash,
                            uint32_t expected_vocab, bool check_tokens) {
  const int fd = open_input(path);  // refuses a FIFO or directory without blocking
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("token shard {}: cannot stat: {}", path, std::strerror(errno));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < TokenShardHeader::kSize) {
    ::close(fd);
    fail("token shard {}: truncated: {} bytes, shorter than the {}-byte header", path, size,
         TokenShardHeader::kSize);
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) fail("token shard {}: cannot map: {}", path, std::strerror(errno));
  TokenShard s;
  s.path_ = path;
  s.map_ = map;
  s.map_size_ = size;
  const auto* p = static_cast<const uint8_t*>(map);
  if (std::memcmp(p, TokenShardHeader::kMagic, 8) != 0)
    fail("token shard {}: wrong magic (expected \"MARINTOK\"): not a marin token shard", path);
  TokenShardHeader& h = s.h_;
  h.version = get<uint32_t>(p + 8);
  h.token_bytes = get<uint32_t>(p + 12);
  h.vocab_size = get<uint32_t>(p + 16);
  h.tokenizer_hash = get<uint64_t>(p + 24);
  h.documents = get<uint64_t>(p + 32);
  h.tokens = get<uint64_t>(p + 40);
  h.text_bytes = get<uint64_t>(p + 48);
  if (h.version != TokenShardHeader::kVersion)
    fail("token shard {}: unsupported format version {} (this build reads version {})", path,
         h.version, TokenShardHeader::kVersion);
  const uint32_t want_width = h.vocab_size <= 65536 ? 2 : 4;
  if (h.vocab_size == 0 || h.token_bytes != want_width)
    fail("token shard {}: header has {} bytes per token for vocab size {} (expected {})", path,
         h.token_bytes, h.vocab_size, want_width);
  // Sizes in the header against the real file (guarding the arithmetic against overflow).
  if (h.documents > (size / 8) || h.tokens > size / h.token_bytes)
    fail(
        "token shard {}: truncated or corrupt: header claims {} documents and {} tokens but the "
        "file has {} bytes",
        path, h.documents, h.tokens, size);
  const uint64_t want = TokenShardHeader::kSize + 8 * (h.documents + 1) + h.tokens * h.token_bytes;
  if (size < want)
    fail("token shard {}: truncated: {} bytes, the header implies {} ({} documents, {} tokens)",
         path, size, want, h.documents, h.tokens);
  if (size > want)
    fail("token shard {}: {} trailing bytes after the {} the header implies", path, size - want,
         want);
  if (h.tokenizer_hash != expected_hash)
    fail(
        "token shard {}: made with tokenizer hash {} but the tokenizer in use has hash {}; "
        "re-run `marin tokenize` with this tokenizer",
        path, hex64(h.tokenizer_hash), hex64(expected_hash));
  if (expected_vocab > 0 && h.vocab_size != expected_vocab)
    fail("token shard {}: vocab size {} but the tokenizer/model has {}", path, h.vocab_size,
         expected_vocab);
  s.offsets_ = reinterpret_cast<const uint64_t*>(p + TokenShardHeader::kSize);
  s.tokens_ = p + TokenShardHeader::kSize + 8 * (h.documents + 1);
  if (s.offsets_[0] != 0 || s.offsets_[h.documents] != h.tokens)
    fail("token shard {}: document index must run from 0 to the token count {} (found {} .. {})",
         path, h.tokens, s.offsets_[0], s.offsets_[h.documents]);
  for (uint64_t d = 0; d < h.documents; ++d)
    if (s.offsets_[d + 1] < s.offsets_[d])
      fail("token shard {}: document index decreases at document {}", path, d);
  if (check_tokens) {
    uint32_t max = 0;
    if (h.token_bytes == 2) {
      const auto* t = reinterpret_cast<const uint16_t*>(s.tokens_);
      for (uint64_t i = 0; i < h.tokens; ++i) max = std::max<uint32_t>(max, t[i]);
    } else {
      const auto* t = reinterpret_cast<const uint32_t*>(s.tokens_);
      for (uint64_t i = 0; i < h.tokens; ++i) max = std::max(max, t[i]);
    }
    if (h.tokens > 0 && max >= h.vocab_size)
      fail("token shard {}: token id {} is outside the vocabulary of {}", path, max, h.vocab_size);
  }
  return s;
}

void TokenShard::copy(uint64_t begin, uint64_t n, int32_t* out) const {
  if (h_.token_bytes == 2) {
    const auto* t = reinterpret_cast<const uint16_t*>(tokens_) + begin;
    for (uint64_t i = 0; i < n; ++i) out[i] = t[i];
  } else {
    const auto* t = reinterpret_cast<const uint32_t*>(tokens_) + begin;
    for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(t[i]);
  }
}

std::vector<uint32_t> TokenShard::document(uint64_t d) const {
  std::vector<uint32_t> v(doc_size(d));
  for (uint64_t i = 0; i < v.size(); ++i) v[i] = token(doc_begin(d) + i);
  return v;
}

// ---- manifest -----------------------------------------------------------------------------------

TokenManifest TokenManifest::load(const std::string& dir) {
  const std::string file = (fs::path(dir) / "manifest.json").string();
  if (!fs::exists(file))
    fail("token directory {}: no manifest.json (expected the output of `marin tokenize`)", dir);
  const json j = load_json(file);
  TokenManifest m;
  m.dir = dir;
  try {
    if (j.value("format", json()) != kFormat)
      fail("{}: format is {}, expected '{}'", file, j.value("format", json()).dump(), kFormat);
    m.tokenizer_hash = parse_hex(j.at("tokenizer_hash"), file);
    m.vocab_size = j.at("vocab_size").get<uint32_t>();
    m.corpus = j.value("corpus", "");
    if (j.contains("sources")) m.sources = j.at("sources");
    if (j.contains("skipped"))
      for (const auto& [k, v] : j.at("skipped").items()) m.skipped[k] = v.get<uint64_t>();
    for (const json& s : j.at("shards")) {
      TokenShardInfo i;
      i.file = s.at("file").get<std::string>();
      i.domain = s.at("domain").get<std::string>();
      i.split = s.at("split").get<std::string>();
      i.documents = s.at("documents").get<uint64_t>();
      i.tokens = s.at("tokens").get<uint64_t>();
      i.bytes = s.at("bytes").get<uint64_t>();
      m.shards.push_back(std::move(i));
    }
  } catch (const json::exception& e) {
    fail("{}: missing or malformed field: {}", file, e.what());
  }
  if (m.vocab_size == 0) fail("{}: vocab_size must be positive", file);
  std::set<std::string> seen;
  for (const TokenShardInfo& i : m.shards) {
    check_manifest_path(i.file, file);
    if (!seen.insert(fs::path(i.file).lexically_normal().string()).second)
      fail("{}: shard '{}' is listed twice (its data would be read twice)", file, i.file);
    if (i.split != "train" && i.split != "valid")
      fail("{}: shard '{}' has split '{}' (expected train or valid)", file, i.file, i.split);
  }
  return m;
}

TokenShard TokenManifest::open(const TokenShardInfo& s, uint64_t expected_hash,
                               uint32_t expected_vocab, bool check_tokens) const {
  const std::string p = path(s);
  TokenShard sh = TokenShard::open(p, expected_hash, expected_vocab, check_tokens);
  const TokenShardHeader& h = sh.header();
  const std::string where = (fs::path(dir) / "manifest.json").string();
  if (h.vocab_size != vocab_size)
    fail("{}: vocab_size {} but shard {} has vocab size {}", where, vocab_size, p, h.vocab_size);
  if (h.documents != s.documents || h.tokens != s.tokens || h.text_bytes != s.bytes)
    fail(
        "{}: shard '{}' is listed with {} documents, {} tokens, {} bytes but its header has {} "
        "documents, {} tokens, {} bytes",
        where, s.file, s.documents, s.tokens, s.bytes, h.documents, h.tokens, h.text_bytes);
  return sh;
}

json to_json(const TokenShardInfo& s) {
  return {{"file", s.file},           {"domain", s.domain}, {"split", s.split},
          {"documents", s.documents}, {"tokens", s.tokens}, {"bytes", s.bytes}};
}

json TokenManifest::to_json() const {
  json shards = json::array();
  json domains = json::object();
  uint64_t totals[3] = {0, 0, 0};
  for (const TokenShardInfo& s : this->shards) {
    shards.push_back(marin::to_json(s));
    json& d = domains[s.domain][s.split];
    if (d.is_null()) d = {{"shards", 0}, {"documents", 0}, {"tokens", 0}, {"bytes", 0}};
    d["shards"] = d["shards"].get<uint64_t>() + 1;
    d["documents"] = d["documents"].get<uint64_t>() + s.documents;
    d["tokens"] = d["tokens"].get<uint64_t>() + s.tokens;
    d["bytes"] = d["bytes"].get<uint64_t>() + s.bytes;
    totals[0] += s.documents;
    totals[1] += s.tokens;
    totals[2] += s.bytes;
  }
  json out = {
      {"format", kFormat},
      {"tokenizer_hash", hex64(tokenizer_hash)},
      {"vocab_size", vocab_size},
      {"dtype", vocab_size <= 65536 ? "uint16" : "uint32"},
      {"corpus", corpus},
      {"eos_appended", "each document is its text followed by EOS when the tokenizer has one"},
      {"domains", domains},
      {"totals", {{"documents", totals[0]}, {"tokens", totals[1]}, {"bytes", totals[2]}}},
      {"shards", shards}};
  if (!sources.empty()) out["sources"] = sources;
  if (!skipped.empty()) out["skipped"] = skipped;
  return out;
}

std::vector<std::string> TokenManifest::domains() const {
  std::set<std::string> s;
  for (const auto& i : shards) s.insert(i.domain);
  return {s.begin(), s.end()};
}

std::vector<TokenShardInfo> TokenManifest::find(const std::string& domain,
                                                const std::string& split) const {
  std::vector<TokenShardInfo> out;
  for (const auto& i : shards)
    if (i.domain == domain && i.split == split) out.push_back(i);
  return out;
}

std::string TokenManifest::path(const TokenShardInfo& s) const {
  return (fs::path(dir) / s.file).string();
}

// ---- tokenize -----------------------------------------------------------------------------------

namespace {

struct TextShard {
  fs::path path;
  std::string domain, split, stem;
  uint64_t size = 0;
};

std::vector<TextShard> find_text_shards(const std::string& root,
                                        const std::vector<std::string>& splits) {
  if (!fs::is_directory(root))
    fail("corpus {}: not a directory (expected <domain>/<split>-NNNNN.jsonl shards)", root);
  std::vector<TextShard> out;
  for (const auto& d : fs::directory_iterator(root)) {
    if (!d.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(d.path())) {
      if (!f.is_regular_file()) continue;
      const std::optional<std::string> split =
          text_corpus::shard_split(f.path().filename().string());
      if (!split || std::find(splits.begin(), splits.end(), *split) == splits.end()) continue;
      out.push_back({f.path(), d.path().filename().string(), *split, f.path().stem().string(),
                     static_cast<uint64_t>(f.file_size())});
    }
  }
  std::sort(out.begin(), out.end(), [](const TextShard& a, const TextShard& b) {
    return std::tie(a.domain, a.stem) < std::tie(b.domain, b.stem);
  });
  if (out.empty())
    fail("corpus {}: no <domain>/{{{}}}-NNNNN.jsonl shards found", root, fmt::join(splits, ","));
  return out;
}

}  // namespace

std::vector<TokenShardInfo> kept_shards(const std::string& out, const Tokenizer& tok,
                                        const std::vector<std::string>& splits) {
  if (!fs::exists(fs::path(out) / "manifest.json")) return {};
  const TokenManifest old = TokenManifest::load(out);
  if (old.tokenizer_hash != tok.hash() || old.vocab_size != tok.vocab_size()) return {};
  std::vector<TokenShardInfo> kept;
  for (const TokenShardInfo& s : old.shards)
    if (std::find(splits.begin(), splits.end(), s.split) == splits.end()) kept.push_back(s);
  return kept;
}

void encode_document(const Tokenizer& tok, std::string_view text, std::vector<uint32_t>& out) {
  // The post-processor's template (a BOS for Llama 2/Gemma), then EOS unless the template ends
  // with it.
  const std::vector<uint32_t>& suffix = tok.template_suffix();
  out.insert(out.end(), tok.template_prefix().begin(), tok.template_prefix().end());
  tok.encode_into(text, out);
  out.insert(out.end(), suffix.begin(), suffix.end());
  if (const std::optional<uint32_t> eos = tok.eos();
      eos && (suffix.empty() || suffix.back() != *eos))
    out.push_back(*eos);
}

TokenManifest tokenize_corpus(const Tokenizer& tok, const TokenizeOptions& o) {
  for (const auto& s : o.splits)
    if (s != "train" && s != "valid") fail("tokenize: split '{}' must be train or valid", s);
  const std::vector<TextShard> shards = find_text_shards(o.corpus, o.splits);
  uint64_t total = 0;
  for (const auto& s : shards) total += s.size;
  TokenManifest m;
  m.dir = o.out;
  m.tokenizer_hash = tok.hash();
  m.vocab_size = tok.vocab_size();
  m.corpus = o.corpus;
  fs::create_directories(o.out);
  m.shards = kept_shards(o.out, tok, o.splits);
  const corpus::ShardChecksums sums(o.corpus, o.verify);
  Progress progress(o.progress ? total : 0, "tokenize", "B");
  const int threads = std::max(1, o.threads);
  for (const TextShard& ts : shards) {
    const std::string text = read_file(ts.path.string());
    sums.check(ts.path, text);
    const std::vector<std::string_view> lines = split_lines(text);
    std::vector<std::vector<uint32_t>> docs(lines.size());
    std::vector<uint64_t> bytes(lines.size(), 0);
    std::vector<char> keep(lines.size(), 0);
    std::exception_ptr error;
    std::mutex error_mu;
#pragma omp parallel for schedule(dynamic, 8) num_threads(threads)
    for (int64_t i = 0; i < int64_t(lines.size()); ++i) {
      try {
        const std::string_view line = lines[i];
        if (!text_corpus::blank(line)) {
          json j;
          const std::string& t = text_corpus::document_text(line, ts.path.string(), i + 1, j);
          encode_document(tok, t, docs[i]);
          bytes[i] = t.size();
          keep[i] = 1;
        }
        if (o.progress) progress.add(line.size() + 1);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
    std::vector<uint64_t> offsets{0};
    uint64_t n = 0, text_bytes = 0;
    for (size_t i = 0; i < docs.size(); ++i)
      if (keep[i]) n += docs[i].size();
    std::vector<uint32_t> tokens;
    tokens.reserve(n);
    for (size_t i = 0; i < docs.size(); ++i) {
      if (!keep[i]) continue;
      tokens.insert(tokens.end(), docs[i].begin(), docs[i].end());
      offsets.push_back(tokens.size());
      text_bytes += bytes[i];
    }
    TokenShardInfo info{text_corpus::token_shard_file(ts.domain, ts.stem),
                        ts.domain,
                        ts.split,
                        offsets.size() - 1,
                        tokens.size(),
                        text_bytes};
    fs::create_directories(fs::path(o.out) / ts.domain);
    write_token_shard(m.path(info), m.vocab_size, m.tokenizer_hash, text_bytes, offsets, tokens);
    m.shards.push_back(std::move(info));
  }
  progress.finish();
  write_file_atomic((fs::path(o.out) / "manifest.json").string(), m.to_json().dump(2) + "\n");
  return m;
}

}  // namespace marin
