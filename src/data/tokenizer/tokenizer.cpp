// Byte-level BPE: loading (.tiktoken, tokenizer.json), saving, encoding, decoding, hashing.
// Training lives in train.cpp.
#include "data/tokenizer/tokenizer.hpp"

#include <fmt/core.h>
#include <utf8proc.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "core/utf8.hpp"
#include "data/tokenizer/impl.hpp"

namespace marin {

const char* const Tokenizer::kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const Tokenizer::kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const Tokenizer::kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::vector<std::string> Tokenizer::default_specials() {
  return {"<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"};
}

namespace {

std::atomic<uint64_t> g_instances{1};

// ---- GPT-2 byte <-> unicode mapping (printable bytes map to themselves, others to U+0100..) ----
struct ByteUnicode {
  std::array<uint32_t, 256> to_cp{};
  std::array<int, 512> to_byte{};
  ByteUnicode() {
    to_byte.fill(-1);
    std::array<bool, 256> direct{};
    for (int b = '!'; b <= '~'; ++b) direct[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
    uint32_t n = 0;
    for (int b = 0; b < 256; ++b) to_cp[b] = direct[b] ? uint32_t(b) : 256 + n++;
    for (int b = 0; b < 256; ++b) to_byte[to_cp[b]] = b;
  }
};
const ByteUnicode& byte_unicode() {
  static const ByteUnicode m;
  return m;
}

std::string bytes_to_unicode(std::string_view bytes) {
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) utf8::append(s, byte_unicode().to_cp[c]);
  return s;
}

// Inverse of bytes_to_unicode; false if `s` holds a character outside the mapping.
bool unicode_to_bytes(std::string_view s, std::string& out) {
  out.clear();
  const auto& m = byte_unicode();
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    const size_t n = utf8::decode(s, i, cp);
    if (n == 0) return false;
    i += n;
    if (cp >= 512 || m.to_byte[cp] < 0) return false;
    out += char(m.to_byte[cp]);
  }
  return true;
}

int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool b64_decode(std::string_view in, std::string& out) {
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t i = 0;
  for (; i < in.size() && in[i] != '='; ++i) {
    int v = b64_value(in[i]);
    if (v < 0) return false;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xFF);
    }
  }
  for (; i < in.size(); ++i)
    if (in[i] != '=') return false;
  return !out.empty() || in.empty();
}

// ---- per-thread cache of piece -> ids for pieces that are not themselves tokens ----
struct PieceCache {
  static constexpr size_t kSlots = 1 << 16;
  static constexpr size_t kMaxEntries = kSlots / 2;
  static constexpr size_t kMaxPiece = 128;
  struct Slot {
    uint64_t h = 0;
    uint32_t key_off = 0, ids_off = 0;
    uint16_t key_len = 0, ids_len = 0;
    bool used = false;
  };
  // A small direct-mapped table in front of everything (fits in L2): short pieces with at most
  // four ids, which is nearly all of real text; a hit costs no vocabulary probe.
  static constexpr size_t kHot = 4096;
  static constexpr size_t kHotKey = 22;
  struct Hot {
    uint64_t h = 0;
    uint8_t len = 0, n = 0;
    char key[kHotKey];
    uint32_t ids[4];
  };
  uint64_t owner = 0;
  size_t count = 0;
  std::vector<Hot> hot;
  std::vector<Slot> slots;
  std::string keys;
  std::vector<uint32_t> ids;

  void reset(uint64_t inst) {
    owner = inst;
    count = 0;
    slots.assign(kSlots, Slot{});
    hot.assign(kHot, Hot{});
    keys.clear();
    ids.clear();
  }
  bool get(std::string_view p, uint64_t h, std::vector<uint32_t>& out) const {
    for (size_t i = h & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      const Slot& s = slots[i];
      if (!s.used) return false;
      if (s.h == h && std::string_view(keys).substr(s.key_off, s.key_len) == p) {
        out.insert(out.end(), ids.begin() + s.ids_off, ids.begin() + s.ids_off + s.ids_len);
        return true;
      }
    }
  }
  void put(std::string_view p, uint64_t h, const uint32_t* v, size_t n) {
    if (count >= kMaxEntries) reset(owner);
    size_t i = h & (kSlots - 1);
    while (slots[i].used) i = (i + 1) & (kSlots - 1);
    slots[i] =
        Slot{h, uint32_t(keys.size()), uint32_t(ids.size()), uint16_t(p.size()), uint16_t(n), true};
    keys.append(p);
    ids.insert(ids.end(), v, v + n);
    ++count;
  }
};

PieceCache& piece_cache(uint64_t instance) {
  thread_local PieceCache c;
  if (c.owner != instance) c.reset(instance);
  return c;
}

struct NamedSpecial {
  const char* text;
  uint32_t id;
};

}  // namespace

// ================================ Impl ================================

void Tokenizer::Impl::index_vocab() {
  vocab.build(tokens, kind, kNormal);
}

void Tokenizer::Impl::derive_merges_from_ranks() {
  // tiktoken merges the adjacent pair whose concatenation has the lowest rank. The equivalent
  // merge list has, for each token in rank order, every split into two tokens.
  merges.clear();
  for (uint32_t id = 0; id < tokens.size(); ++id) {
    if (kind[id] != kNormal || tokens[id].size() < 2) continue;
    std::string_view t = tokens[id];
    for (size_t k = 1; k < t.size(); ++k) {
      uint32_t a = vocab.find(t.substr(0, k));
      if (a == BytesIndex::kEmpty) continue;
      uint32_t b = vocab.find(t.substr(k));
      if (b == BytesIndex::kEmpty) continue;
      merges.emplace_back(a, b);
    }
  }
}

bool Tokenizer::Impl::classic() const {
  return pipeline.empty();
}

void Tokenizer::Impl::finalize(const std::string& origin) {
  index_vocab();
  fallback_id.fill(UINT32_MAX);
  if (byte_level) {
    for (int b = 0; b < 256; ++b) {
      char c = char(b);
      uint32_t id = vocab.find(std::string_view(&c, 1));
      if (id == BytesIndex::kEmpty)
        fail("{}: the vocabulary has no token for byte 0x{:02X}; a byte-level BPE needs all 256",
             origin, b);
      byte_id[b] = id;
    }
  } else {
    for (int b = 0; b < 256; ++b) fallback_id[b] = vocab.find(fmt::format("<0x{:02X}>", b));
  }
  unk_id = UINT32_MAX;
  if (!unk_token.empty()) {
    unk_id = vocab.find(unk_token);
    if (unk_id == BytesIndex::kEmpty)
      fail("{}: model.unk_token \"{}\" is not in model.vocab", origin, unk_token);
  }
  merge_result.resize(merges.size());
  std::string cat;
  for (size_t r = 0; r < merges.size(); ++r) {
    auto [a, b] = merges[r];
    if (a >= tokens.size() || b >= tokens.size() || kind[a] != kNormal || kind[b] != kNormal)
      fail("{}: merge #{} refers to a token id that is not in the vocabulary", origin, r);
    // As the Rust crate: the right part loses the continuing-subword prefix's length.
    const std::string& right = tokens[b];
    cat.assign(tokens[a]);
    cat.append(right, std::min(subword_prefix.size(), right.size()), std::string::npos);
    uint32_t id = vocab.find(cat);
    if (id == BytesIndex::kEmpty)
      fail("{}: merge #{} produces a token that is not in the vocabulary", origin, r);
    merge_result[r] = id;
  }
  pairs.build(merges, merge_result);

  if (added.empty())
    for (uint32_t id = 0; id < tokens.size(); ++id)
      if (kind[id] == kSpecial) added.push_back(AddedToken{id});
  specials.clear();
  special_first.fill(false);
  raw_first.fill(false);
  norm_first.fill(false);
  added_raw.clear();
  added_norm.clear();
  bos.reset();
  eos.reset();
  pad.reset();
  static const char* const kBos[] = {"<|begin_of_text|>", "<|bos|>", "<s>", "<|startoftext|>",
                                     "<bos>"};
  static const char* const kEos[] = {"<|end_of_text|>", "<|endoftext|>", "<|eos|>", "</s>",
                                     "<eos>"};
  static const char* const kPad[] = {"<|pad|>", "<pad>", "<|padding|>"};
  for (const AddedToken& t : added) {
    const uint32_t id = t.id;
    if (tokens[id].empty()) fail("{}: added token {} is empty", origin, id);
    const unsigned char c0 = static_cast<unsigned char>(tokens[id][0]);
    (t.normalized ? added_norm : added_raw).push_back(&t);
    (t.normalized ? norm_first : raw_first)[c0] = true;
    if (!t.special) continue;
    specials.push_back(id);
    special_first[c0] = true;
    auto is = [&](const auto& names) {
      return std::find(std::begin(names), std::end(names), tokens[id]) != std::end(names);
    };
    if (!bos && is(kBos)) bos = id;
    if (!eos && is(kEos)) eos = id;
    if (!pad && is(kPad)) pad = id;
  }
  auto longest_first = [&](auto& v, auto text) {
    std::stable_sort(v.begin(), v.end(),
                     [&](const auto& a, const auto& b) { return text(a).size() > text(b).size(); });
  };
  longest_first(specials, [&](uint32_t id) -> const std::string& { return tokens[id]; });
  longest_first(added_raw,
                [&](const AddedToken* t) -> const std::string& { return tokens[t->id]; });
  longest_first(added_norm,
                [&](const AddedToken* t) -> const std::string& { return tokens[t->id]; });

  regex = pattern.empty() ? nullptr : std::make_unique<SplitRegex>(pattern);

  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  auto put = [&](const void* p, size_t n) { XXH64_update(st, p, n); };
  auto put64 = [&](uint64_t v) { put(&v, sizeof v); };
  put("marin-bpe-v1", 12);
  put64(pattern.size());
  put(pattern.data(), pattern.size());
  put64(ignore_merges);
  put64(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    put64(kind[id]);
    put64(tokens[id].size());
    put(tokens[id].data(), tokens[id].size());
  }
  put64(merges.size());
  for (auto [a, b] : merges) put64((uint64_t(a) << 32) | b);
  if (!pipeline.empty()) {  // a tokenizer.json pipeline (absent: the hash of before it existed)
    put64(pipeline.size());
    put(pipeline.data(), pipeline.size());
  }
  hash = XXH64_digest(st);
  XXH64_freeState(st);
  instance = g_instances.fetch_add(1);
}

void Tokenizer::Impl::encode_piece(std::string_view p, std::vector<uint32_t>& out) const {
  if (p.empty()) return;
  if (p.size() > kMaxWordBytes)
    fail(
        "a pre-tokenized piece of {} bytes is longer than the limit of {} MiB (kMaxWordBytes, "
        "docs/reliability.md); split the text first",
        p.size(), kMaxWordBytes >> 20);
  if (byte_level && p.size() == 1) {
    out.push_back(byte_id[static_cast<unsigned char>(p[0])]);
    return;
  }
  const uint64_t h = bytes_hash(p);
  if (p.size() > PieceCache::kMaxPiece) {
    uint32_t id = ignore_merges ? vocab.find(p, h) : BytesIndex::kEmpty;
    if (id != BytesIndex::kEmpty)
      out.push_back(id);
    else
      bpe(p, out);
    return;
  }
  PieceCache& cache = piece_cache(instance);
  PieceCache::Hot* hot = nullptr;
  if (p.size() <= PieceCache::kHotKey) {
    hot = &cache.hot[h & (PieceCache::kHot - 1)];
    if (hot->h == h && hot->len == p.size() && std::memcmp(hot->key, p.data(), p.size()) == 0) {
      out.insert(out.end(), hot->ids, hot->ids + hot->n);
      return;
    }
  }
  const size_t n0 = out.size();
  uint32_t id = ignore_merges ? vocab.find(p, h) : BytesIndex::kEmpty;
  if (id != BytesIndex::kEmpty) {
    out.push_back(id);
  } else if (!cache.get(p, h, out)) {
    bpe(p, out);
    cache.put(p, h, out.data() + n0, out.size() - n0);
  }
  const size_t n = out.size() - n0;
  if (hot && n <= 4) {
    hot->h = h;
    hot->len = uint8_t(p.size());
    hot->n = uint8_t(n);
    std::memcpy(hot->key, p.data(), p.size());
    std::copy(out.begin() + n0, out.end(), hot->ids);
  }
}

size_t Tokenizer::Impl::symbols(std::string_view p, std::vector<uint32_t>& ids) const {
  ids.clear();
  if (byte_level) {
    ids.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) ids[i] = byte_id[static_cast<unsigned char>(p[i])];
    return ids.size();
  }
  // BPE::merge_word of the Rust crate: each character (with the continuing-subword prefix when
  // not first, the end-of-word suffix when last) is a token, else its <0xNN> bytes, else unk
  // (consecutive unknowns fused into one when fuse_unk).
  bool pending_unk = false;
  std::string key;
  for (size_t i = 0; i < p.size();) {
    uint32_t cp;
    size_t len = utf8::decode(p, i, cp);
    if (len == 0) len = 1;
    key.clear();
    if (i > 0) key += subword_prefix;
    key.append(p.substr(i, len));
    if (i + len >= p.size()) key += word_suffix;
    i += len;
    const uint32_t id = vocab.find(key);
    if (id != BytesIndex::kEmpty) {
      if (pending_unk) ids.push_back(unk_id);
      pending_unk = false;
      ids.push_back(id);
      continue;
    }
    if (byte_fallback) {
      bool all = true;
      for (unsigned char c : key) all = all && fallback_id[c] != UINT32_MAX;
      if (all) {
        for (unsigned char c : key) ids.push_back(fallback_id[c]);
        continue;
      }
    }
    if (unk_id == UINT32_MAX) continue;  // no unk token: the character is dropped (as in Rust)
    if (pending_unk && !fuse_unk) ids.push_back(unk_id);
    pending_unk = true;
  }
  if (pending_unk) ids.push_back(unk_id);
  return ids.size();
}

void Tokenizer::Impl::bpe(std::string_view p, std::vector<uint32_t>& out) const {
  thread_local std::vector<uint32_t> sym;
  const size_t n = symbols(p, sym);
  constexpr uint32_t kNo = PairIndex::kNone;
  if (n <= 256) {
    // Short pieces: arrays and a linear scan for the lowest rank (leftmost on ties).
    uint32_t ids[256], rank[256], res[256];
    std::copy(sym.begin(), sym.begin() + n, ids);
    size_t m = n;
    for (size_t i = 0; i + 1 < m; ++i) {
      auto hit = pairs.find(ids[i], ids[i + 1]);
      rank[i] = hit.rank;
      res[i] = hit.id;
    }
    while (m > 1) {
      size_t best = 0;
      uint32_t br = rank[0];
      for (size_t i = 1; i + 1 < m; ++i)
        if (rank[i] < br) br = rank[i], best = i;
      if (br == kNo) break;
      ids[best] = res[best];
      for (size_t i = best + 1; i + 1 < m; ++i) ids[i] = ids[i + 1];
      for (size_t i = best + 1; i + 2 < m; ++i) rank[i] = rank[i + 1], res[i] = res[i + 1];
      --m;
      if (best + 1 < m) {
        auto hit = pairs.find(ids[best], ids[best + 1]);
        rank[best] = hit.rank;
        res[best] = hit.id;
      }
      if (best > 0) {
        auto hit = pairs.find(ids[best - 1], ids[best]);
        rank[best - 1] = hit.rank;
        res[best - 1] = hit.id;
      }
    }
    out.insert(out.end(), ids, ids + m);
    return;
  }
  // Long pieces: a doubly linked list of parts and a min-heap of (rank, position) candidates;
  // stale candidates are recognised by their recorded ids.
  struct Cand {
    uint32_t rank, pos, a, b;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<uint32_t> ids(sym.begin(), sym.begin() + n);
  std::vector<int64_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = int64_t(i) - 1;
    next[i] = i + 1 < n ? int64_t(i + 1) : -1;
  }
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int64_t l) {
    if (l < 0 || next[l] < 0) return;
    auto hit = pairs.find(ids[l], ids[next[l]]);
    if (hit.rank != kNo) heap.push(Cand{hit.rank, uint32_t(l), ids[l], ids[next[l]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(int64_t(i));
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    int64_t l = c.pos, r = next[l];
    if (!alive[l] || r < 0 || ids[l] != c.a || ids[r] != c.b) continue;
    ids[l] = merge_result[c.rank];
    alive[r] = false;
    next[l] = next[r];
    if (next[r] >= 0) prev[next[r]] = l;
    push(prev[l]);
    push(l);
  }
  for (int64_t i = 0; i >= 0; i = next[i]) out.push_back(ids[i]);
}

// ================================ Tokenizer ================================

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {
  impl_->pattern = kCl100kPattern;
  impl_->tokens.resize(256);
  impl_->kind.assign(256, kNormal);
  for (int b = 0; b < 256; ++b) impl_->tokens[b] = std::string(1, char(b));
  impl_->finalize("<empty tokenizer>");
}
Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

uint32_t Tokenizer::vocab_size() const {
  return uint32_t(impl_->tokens.size());
}
uint32_t Tokenizer::num_merges() const {
  return uint32_t(impl_->merges.size());
}
std::optional<uint32_t> Tokenizer::bos() const {
  return impl_->bos;
}
std::optional<uint32_t> Tokenizer::eos() const {
  return impl_->eos;
}
std::optional<uint32_t> Tokenizer::pad() const {
  return impl_->pad;
}
uint64_t Tokenizer::hash() const {
  return impl_->hash;
}
const std::string& Tokenizer::pattern() const {
  return impl_->pattern;
}
bool Tokenizer::has_token(uint32_t id) const {
  return id < impl_->kind.size() && impl_->kind[id] != kAbsent;
}
bool Tokenizer::is_special(uint32_t id) const {
  return id < impl_->kind.size() && impl_->kind[id] == kSpecial;
}
std::string_view Tokenizer::token_bytes(uint32_t id) const {
  if (!has_token(id)) fail("token id {} is not in the vocabulary (size {})", id, vocab_size());
  return impl_->tokens[id];
}
std::optional<uint32_t> Tokenizer::token_id(std::string_view bytes) const {
  uint32_t id = impl_->vocab.find(bytes);
  if (id != BytesIndex::kEmpty) return id;
  for (uint32_t s : impl_->specials)
    if (impl_->tokens[s] == bytes) return s;
  return std::nullopt;
}

std::vector<std::string_view> Tokenizer::split(std::string_view text) const {
  std::vector<std::string_view> out;
  if (!impl_->regex) {
    if (!text.empty()) out.push_back(text);
    return out;
  }
  impl_->regex->split(text, [&](std::string_view p) { out.push_back(p); });
  return out;
}

namespace {

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

// The character that ends before `pos` (0 when none or not UTF-8); its length in `len`.
uint32_t char_before(std::string_view s, size_t pos, size_t& len) {
  size_t k = pos;
  while (k > 0 && pos - k < 4) {
    --k;
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) break;
  }
  uint32_t cp = 0;
  len = pos > 0 ? utf8::decode(s, k, cp) : 0;
  if (len != pos - k) len = 0;
  return len ? cp : 0;
}

bool is_space(uint32_t cp) {  // Rust regex's \s: the White_Space property
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool is_word(uint32_t cp) {  // Rust regex's \w: letters, marks, decimal digits, connectors
  if (cp < 0x80) return std::isalnum(int(cp)) || cp == '_';
  switch (utf8proc_category(utf8proc_int32_t(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return cp == 0x200C || cp == 0x200D;
  }
}

}  // namespace

template <class Plain>
void Tokenizer::Impl::split_added(std::string_view text, const std::vector<const AddedToken*>& set,
                                  const std::array<bool, 256>& first, bool allow_special,
                                  std::vector<uint32_t>& out, Plain&& plain) const {
  // AddedVocabulary::find_matches: leftmost-longest, non-overlapping; a match that is refused
  // (a special token when specials are not allowed, single_word inside a word) stays text.
  size_t start = 0, i = 0;
  while (i < text.size()) {
    if (!first[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    const AddedToken* hit = nullptr;
    for (const AddedToken* t : set)
      if (text.compare(i, tokens[t->id].size(), tokens[t->id]) == 0) {
        hit = t;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    size_t b = i, e = i + tokens[hit->id].size(), len = 0;
    uint32_t cp = 0;
    bool refuse = hit->special && !allow_special;
    if (!refuse && hit->single_word) {
      const bool word_before = b > 0 && is_word(char_before(text, b, len)) && len;
      const bool word_after = e < text.size() && utf8::decode(text, e, cp) && is_word(cp);
      refuse = word_before || word_after;
    }
    if (refuse) {
      i = e;
      continue;
    }
    if (hit->lstrip)
      while (b > start && is_space(char_before(text, b, len)) && len) b -= len;
    if (hit->rstrip)
      while (e < text.size() && (len = utf8::decode(text, e, cp)) && is_space(cp)) e += len;
    if (b > start) plain(text.substr(start, b - start), start);
    out.push_back(hit->id);
    start = i = e;
  }
  if (start < text.size()) plain(text.substr(start), start);
}

void Tokenizer::Impl::regex_pieces(std::string_view text, std::vector<uint32_t>& out) const {
  if (keep_gaps) {
    regex->split(text, [&](std::string_view p) { encode_piece(p, out); });
    return;
  }
  // Split with behavior Removed and invert: only the matches are pieces (bytes that are not
  // UTF-8, which no match covers, are kept so that every byte is encoded).
  size_t pos = 0, ms = 0, me = 0;
  while (pos < text.size() && regex->find(text, pos, ms, me)) {
    if (ms > pos && !utf8::valid(text.substr(pos, ms - pos)))
      encode_piece(text.substr(pos, ms - pos), out);
    if (me == ms) me = ms + 1;
    encode_piece(text.substr(ms, me - ms), out);
    pos = me;
  }
  if (pos < text.size() && !utf8::valid(text.substr(pos))) encode_piece(text.substr(pos), out);
}

void Tokenizer::Impl::encode_text(std::string_view text, bool at_start, bool allow_special,
                                  std::vector<uint32_t>& out) const {
  if (text.empty()) return;
  auto pre_tokenize = [&](std::string_view seg, bool seg_at_start) {
    if (pre_tokenizer) {
      thread_local std::vector<tok::Piece> pieces;
      pieces.clear();
      pre_tokenizer->split(tok::Piece{std::string(seg), seg_at_start}, pieces);
      for (const tok::Piece& p : pieces) encode_piece(p.text, out);
    } else if (regex) {
      regex_pieces(seg, out);
    } else {
      encode_piece(seg, out);
    }
  };
  if (!normalizer && byte_level && added_norm.empty()) {  // raw bytes, as tiktoken encodes them
    pre_tokenize(text, at_start);
    return;
  }
  std::string s = utf8::sanitize(text);
  if (normalizer && !(normalizer->ascii_identity() && is_ascii(s))) normalizer->apply(s);
  if (added_norm.empty()) {
    pre_tokenize(s, at_start);
    return;
  }
  split_added(s, added_norm, norm_first, allow_special, out,
              [&](std::string_view seg, size_t off) { pre_tokenize(seg, at_start && off == 0); });
}

void Tokenizer::encode_into(std::string_view text, std::vector<uint32_t>& out,
                            bool allow_special) const {
  const Impl& m = *impl_;
  m.split_added(
      text, m.added_raw, m.raw_first, allow_special, out,
      [&](std::string_view seg, size_t off) { m.encode_text(seg, off == 0, allow_special, out); });
}

std::vector<uint32_t> Tokenizer::encode_document(std::string_view text) const {
  std::vector<uint32_t> out(impl_->post.prefix);
  encode_into(text, out);
  out.insert(out.end(), impl_->post.suffix.begin(), impl_->post.suffix.end());
  return out;
}

const std::vector<uint32_t>& Tokenizer::template_prefix() const {
  return impl_->post.prefix;
}
const std::vector<uint32_t>& Tokenizer::template_suffix() const {
  return impl_->post.suffix;
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3 + 8);
  encode_into(text, out, allow_special);
  return out;
}

void Tokenizer::decode_into(std::span<const uint32_t> ids, std::string& out) const {
  const Impl& m = *impl_;
  for (uint32_t id : ids) {
    if (id >= m.kind.size() || m.kind[id] == kAbsent)
      fail("cannot decode token id {}: not in the vocabulary (size {})", id, vocab_size());
    if (!m.decoder) out.append(m.tokens[id]);
  }
  if (!m.decoder) return;
  std::vector<std::string> parts;
  parts.reserve(ids.size());
  for (uint32_t id : ids) parts.push_back(m.tokens[id]);
  m.decoder->decode_chain(parts);
  for (const auto& p : parts) out += p;
}

std::string Tokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  decode_into(ids, out);
  return out;
}

// ================================ loading ================================

Tokenizer Tokenizer::load(const std::string& path, const std::string& pattern) {
  std::string text = read_file(path);
  size_t i = text.find_first_not_of(" \t\r\n");
  if (i != std::string::npos && text[i] == '{') {
    if (!pattern.empty()) fail("'{}': a tokenizer.json carries its own split regex", path);
    return from_json_text(text, path);
  }
  if (i == std::string::npos) fail("tokenizer file '{}' is empty", path);
  return from_tiktoken(path, pattern);
}

Tokenizer Tokenizer::from_tiktoken(const std::string& path, const std::string& pattern) {
  std::string text = read_file(path);
  auto m = std::make_unique<Impl>();
  std::string stem = std::filesystem::path(path).stem().string();
  std::vector<NamedSpecial> named;
  // The special tokens tiktoken defines next to these rank files.
  if (stem.rfind("cl100k_base", 0) == 0)
    named = {{"<|endoftext|>", 100257},
             {"<|fim_prefix|>", 100258},
             {"<|fim_middle|>", 100259},
             {"<|fim_suffix|>", 100260},
             {"<|endofprompt|>", 100276}};
  else if (stem.rfind("o200k_base", 0) == 0)
    named = {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}};
  else if (stem.rfind("r50k_base", 0) == 0 || stem.rfind("p50k_base", 0) == 0 ||
           stem.rfind("gpt2", 0) == 0)
    named = {{"<|endoftext|>", 50256}};

  const uint64_t lines = uint64_t(std::count(text.begin(), text.end(), '\n')) + 1;
  const uint64_t max_rank = Impl::max_token_id(lines);
  size_t line_no = 0, pos = 0;
  std::string bytes;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    size_t sp = line.find(' ');
    uint64_t rank = 0;
    bool ok = sp != std::string_view::npos && sp > 0 && sp + 1 < line.size() &&
              b64_decode(line.substr(0, sp), bytes) && !bytes.empty();
    for (size_t k = sp + 1; ok && k < line.size(); ++k) {
      ok = line[k] >= '0' && line[k] <= '9' && rank < (1u << 30);
      rank = rank * 10 + uint64_t(line[k] - '0');
    }
    if (!ok)
      fail("'{}' line {}: expected '<base64 token bytes> <rank>' (a .tiktoken rank file)", path,
           line_no);
    if (rank > max_rank)
      fail(
          "'{}' line {}: rank {} is beyond the file's {} lines (ranks of a .tiktoken file are "
          "0..N-1, with at most as many gaps as tokens)",
          path, line_no, rank, lines);
    m->grow_to(uint32_t(rank));
    if (m->kind[rank] != kAbsent) fail("'{}' line {}: rank {} appears twice", path, line_no, rank);
    m->tokens[rank] = bytes;
    m->kind[rank] = kNormal;
  }
  if (m->tokens.empty()) fail("'{}': no tokens found (expected a .tiktoken rank file)", path);
  // The split regex: --pattern, else the sidecar FILE.json, else the file name of a known
  // encoding. Never a guess: a vocabulary split with the wrong regex encodes differently.
  auto known = [](std::string_view name) -> const char* {
    if (name.starts_with("cl100k")) return kCl100kPattern;
    if (name.starts_with("o200k")) return kO200kPattern;
    if (name.starts_with("r50k") || name.starts_with("p50k") || name.starts_with("gpt2"))
      return kGpt2Pattern;
    return nullptr;
  };
  std::string chosen = pattern;
  std::vector<std::pair<std::string, uint32_t>> sidecar_specials;
  const std::string sidecar = path + ".json";
  if (chosen.empty() && std::filesystem::exists(sidecar)) {
    const nlohmann::json side = load_json(sidecar, "the sidecar of a .tiktoken file");
    if (!side.is_object() || !side.contains("pattern") || !side["pattern"].is_string())
      fail(
          "'{}': expected {{\"pattern\": \"cl100k|o200k|p50k|r50k|gpt2|REGEX\", "
          "\"special_tokens\": {{\"<text>\": id}}}}",
          sidecar);
    chosen = side["pattern"].get<std::string>();
    if (side.contains("special_tokens")) {
      if (!side["special_tokens"].is_object())
        fail("'{}': special_tokens: expected an object of text -> id", sidecar);
      for (auto it = side["special_tokens"].begin(); it != side["special_tokens"].end(); ++it) {
        if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() > UINT32_MAX)
          fail("'{}': special_tokens.{}: expected a token id, found {}", sidecar, it.key(),
               it.value().dump());
        if (it.value().get<uint64_t>() > max_rank)
          fail("'{}': special_tokens.{}: id {} is beyond the rank file's {} lines", sidecar,
               it.key(), it.value().get<uint64_t>(), lines);
        sidecar_specials.emplace_back(it.key(), it.value().get<uint32_t>());
      }
    }
  }
  if (chosen.empty()) {
    if (!known(stem))
      fail(
          "'{}': a .tiktoken file does not say how text is split, and its name names no known "
          "encoding (cl100k, o200k, p50k, r50k, gpt2); pass --pattern cl100k|o200k|p50k|r50k|"
          "gpt2|REGEX, or write {} with {{\"pattern\": ...}}",
          path, sidecar);
    m->pattern = known(stem);
  } else if (chosen == "cl100k" || chosen == "o200k" || chosen == "p50k" || chosen == "r50k" ||
             chosen == "gpt2") {
    m->pattern = known(chosen);
  } else {
    m->pattern = chosen;
  }
  if (!sidecar_specials.empty()) {
    named.clear();
    for (const auto& [t, id] : sidecar_specials) named.push_back({t.c_str(), id});
  }
  for (auto [text_, id] : named) {
    if (id < m->tokens.size() && m->kind[id] != kAbsent) continue;
    m->grow_to(id);
    m->tokens[id] = text_;
    m->kind[id] = kSpecial;
  }
  m->ignore_merges = true;
  m->index_vocab();
  for (uint32_t id = 0; id < m->tokens.size(); ++id)
    if (m->kind[id] == kNormal && m->vocab.find(m->tokens[id]) != id)
      fail("'{}': token bytes of rank {} appear twice", path, id);
  m->derive_merges_from_ranks();
  m->finalize("'" + path + "'");
  return Tokenizer(std::move(m));
}

Tokenizer Tokenizer::from_json(const std::string& path) {
  return from_json_text(read_file(path), path);
}

namespace {

// The pre-tokenizer the encoder runs without copies: one regex split (Isolated, or Removed with
// invert) followed by ByteLevel(add_prefix_space=false, use_regex=false), or ByteLevel alone
// with its GPT-2 regex. Sets the regex and whether gaps between matches are pieces.
bool fast_pre_tokenizer(const nlohmann::json& pt, std::string& regex, bool& keep_gaps) {
  auto is_byte_level = [](const nlohmann::json& s, bool use_regex) {
    return s.is_object() && s.value("type", "") == "ByteLevel" &&
           s.value("add_prefix_space", true) == false && s.value("use_regex", true) == use_regex;
  };
  if (is_byte_level(pt, true)) {
    regex = Tokenizer::kGpt2Pattern;
    return true;
  }
  if (!pt.is_object() || pt.value("type", "") != "Sequence" || !pt.contains("pretokenizers"))
    return false;
  const nlohmann::json& steps = pt["pretokenizers"];
  if (!steps.is_array()) return false;
  if (steps.size() == 1 && is_byte_level(steps[0], true)) {
    regex = Tokenizer::kGpt2Pattern;
    return true;
  }
  if (steps.size() != 2 || !is_byte_level(steps[1], false)) return false;
  const nlohmann::json& sp = steps[0];
  if (!sp.is_object() || sp.value("type", "") != "Split" || !sp.contains("pattern") ||
      !sp["pattern"].is_object() || !sp["pattern"].contains("Regex") ||
      !sp["pattern"]["Regex"].is_string())
    return false;
  const nlohmann::json behavior = sp.value("behavior", nlohmann::json("Isolated"));
  const nlohmann::json invert = sp.value("invert", nlohmann::json(false));
  if (behavior == "Isolated" && invert == false)
    keep_gaps = true;
  else if (behavior == "Removed" && invert == true)
    keep_gaps = false;
  else
    return false;
  regex = sp["pattern"]["Regex"].get<std::string>();
  return true;
}

std::string optional_string(const nlohmann::json& obj, const char* key, const std::string& path) {
  if (!obj.contains(key) || obj[key].is_null()) return {};
  if (!obj[key].is_string())
    fail("{}.{}: expected a string or null, found {}", path, key, obj[key].dump());
  return obj[key].get<std::string>();
}

bool optional_bool(const nlohmann::json& obj, const char* key, const std::string& path) {
  if (!obj.contains(key) || obj[key].is_null()) return false;
  if (!obj[key].is_boolean())
    fail("{}.{}: expected true or false, found {}", path, key, obj[key].dump());
  return obj[key].get<bool>();
}

}  // namespace

namespace {

using Impl = Tokenizer::Impl;

// "'ORIGIN': FIELD", the prefix of every error about a field of the file.
std::string json_field(const std::string& origin, const std::string& field) {
  return fmt::format("'{}': {}", origin, field);
}

// j[key], or null where j has no such key.
const nlohmann::json& member_or_null(const nlohmann::json& j, const char* key) {
  static const nlohmann::json null_json;
  return j.contains(key) ? j[key] : null_json;
}

// Refuses what the encoder cannot reproduce (another model type, dropout, truncation, padding)
// and reads the model's options.
void read_model_options(Impl& m, const nlohmann::json& j, const std::string& origin) {
  auto where = [&](const std::string& field) { return json_field(origin, field); };
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    fail("{} is missing (expected a Hugging Face tokenizer.json)", where("model"));
  const nlohmann::json& model = j["model"];
  const std::string mpath = where("model");
  if (model.contains("type") && model["type"] != "BPE")
    tok::unsupported(mpath + ".type", model["type"]);
  if (model.contains("dropout") && !model["dropout"].is_null())
    fail("{}.dropout: {} is not supported (BPE dropout samples ids at random; only null)", mpath,
         model["dropout"].dump());
  for (const char* f : {"truncation", "padding"})
    if (j.contains(f) && !j[f].is_null()) tok::unsupported(where(f), j[f]);

  m.ignore_merges = optional_bool(model, "ignore_merges", mpath);
  m.fuse_unk = optional_bool(model, "fuse_unk", mpath);
  m.byte_fallback = optional_bool(model, "byte_fallback", mpath);
  m.unk_token = optional_string(model, "unk_token", mpath);
  m.subword_prefix = optional_string(model, "continuing_subword_prefix", mpath);
  m.word_suffix = optional_string(model, "end_of_word_suffix", mpath);
}

// The pipeline around the model: pre-tokenizer, normalizer, post-processor and decoder.
void read_pipeline(Impl& m, const nlohmann::json& j, const std::string& origin) {
  auto where = [&](const std::string& field) { return json_field(origin, field); };
  const nlohmann::json& pt = member_or_null(j, "pre_tokenizer");
  const nlohmann::json& nm = member_or_null(j, "normalizer");
  const nlohmann::json& pp = member_or_null(j, "post_processor");
  const nlohmann::json& dc = member_or_null(j, "decoder");
  tok::PreTokenizerInfo info;
  if (!pt.is_null()) {
    auto general = tok::parse_pre_tokenizer(pt, where("pre_tokenizer"), info);
    if (!fast_pre_tokenizer(pt, m.pattern, m.keep_gaps)) m.pre_tokenizer = std::move(general);
  }
  m.byte_level = info.byte_level;
  if (!nm.is_null()) m.normalizer = tok::parse_normalizer(nm, where("normalizer"));
  if (!pp.is_null()) m.post = tok::parse_post_processor(pp, where("post_processor"));
  if (!dc.is_null() && dc.value("type", "") != "ByteLevel")
    m.decoder = tok::parse_decoder(dc, where("decoder"));
}

// model.vocab and added_tokens into the token table, each id checked, then the vocabulary index.
void read_vocabulary(Impl& m, const nlohmann::json& j, const std::string& origin) {
  using nlohmann::json;
  auto where = [&](const std::string& field) { return json_field(origin, field); };
  const json& vocab = member_or_null(j["model"], "vocab");
  if (!vocab.is_object()) fail("{} is not an object", where("model.vocab"));
  const json& added = j.contains("added_tokens") ? j["added_tokens"] : json::array();
  if (!added.is_array()) fail("{} is not an array", where("added_tokens"));
  const uint64_t max_id = Impl::max_token_id(vocab.size() + added.size());
  // An id of the file, bounded by its token count (a damaged id would size the table).
  auto token_id = [&](const json& v, const char* field, const std::string& entry) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > max_id)
      fail(
          "{}: entry '{}' has no valid id (expected an integer in [0, {}], twice the file's {} "
          "tokens)",
          where(field), entry, max_id, vocab.size() + added.size());
    return v.get<uint32_t>();
  };
  std::string bytes;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const uint32_t id = token_id(it.value(), "model.vocab", it.key());
    if (!m.byte_level)
      bytes = it.key();
    else if (!unicode_to_bytes(it.key(), bytes))
      fail("{}: '{}' is not a byte-level (GPT-2 mapped) token", where("model.vocab"), it.key());
    if (bytes.empty()) fail("{}: an empty token (id {})", where("model.vocab"), id);
    m.grow_to(id);
    if (m.kind[id] != kAbsent) fail("{}: id {} appears twice", where("model.vocab"), id);
    m.tokens[id] = bytes;
    m.kind[id] = kNormal;
  }
  for (size_t k = 0; k < added.size(); ++k) {
    const json& t = added[k];
    const std::string apath = fmt::format("added_tokens[{}]", k);
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() || !t.contains("id"))
      fail("{}: expected {{\"id\": N, \"content\": \"...\", ...}}", where(apath));
    const std::string content = t["content"].get<std::string>();
    const uint32_t id = token_id(t["id"], "added_tokens", content);
    const std::string fpath = where(apath);
    AddedToken a{id};
    a.special = optional_bool(t, "special", fpath);
    a.lstrip = optional_bool(t, "lstrip", fpath);
    a.rstrip = optional_bool(t, "rstrip", fpath);
    a.single_word = optional_bool(t, "single_word", fpath);
    a.normalized = t.contains("normalized") ? optional_bool(t, "normalized", fpath) : !a.special;
    m.grow_to(id);
    // A token the model also has keeps its place in the model's vocabulary.
    if (!(m.kind[id] == kNormal && m.tokens[id] == content)) {
      m.tokens[id] = content;
      m.kind[id] = kSpecial;
    }
    m.added.push_back(a);
  }
  m.index_vocab();
  for (uint32_t id = 0; id < m.tokens.size(); ++id)
    if (m.kind[id] == kNormal && m.vocab.find(m.tokens[id]) != id)
      fail("{}: token '{}' appears twice", where("model.vocab"),
           m.byte_level ? bytes_to_unicode(m.tokens[id]) : m.tokens[id]);
}

// model.merges, as 'left right' strings or [left, right] pairs, into pairs of vocabulary ids.
void read_merges(Impl& m, const nlohmann::json& model, const std::string& origin) {
  using nlohmann::json;
  auto where = [&](const std::string& field) { return json_field(origin, field); };
  const json& merges = model.contains("merges") ? model["merges"] : json::array();
  if (!merges.is_array()) fail("{} is not an array", where("model.merges"));
  m.merges.reserve(merges.size());
  std::string a, b;
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& e = merges[r];
    std::string sa, sb;
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        fail("{}: entry {} '{}' is not 'left right'", where("model.merges"), r, s);
      sa = s.substr(0, sp);
      sb = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      sa = e[0].get<std::string>();
      sb = e[1].get<std::string>();
    } else {
      fail("{}: entry {} is neither 'left right' nor [left, right]", where("model.merges"), r);
    }
    if (!m.byte_level) {
      a = sa;
      b = sb;
    } else if (!unicode_to_bytes(sa, a) || !unicode_to_bytes(sb, b)) {
      fail("{}: entry {} is not byte-level", where("model.merges"), r);
    }
    uint32_t ia = m.vocab.find(a), ib = m.vocab.find(b);
    if (ia == BytesIndex::kEmpty || ib == BytesIndex::kEmpty)
      fail("{}: entry {} ('{} {}') names a token that is not in model.vocab", where("model.merges"),
           r, sa, sb);
    m.merges.emplace_back(ia, ib);
  }
}

// Everything besides vocabulary and merges that changes ids goes into the hash, unless the
// tokenizer is a plain byte-level BPE over a split regex (whose hash predates the pipeline).
void set_pipeline_for_hash(Impl& m, const nlohmann::json& j) {
  using nlohmann::json;
  bool plain_added = true;
  for (const AddedToken& t : m.added)
    plain_added =
        plain_added && t.special && !t.lstrip && !t.rstrip && !t.single_word && !t.normalized;
  const bool classic = m.byte_level && !m.normalizer && !m.pre_tokenizer && m.keep_gaps &&
                       m.post.prefix.empty() && m.post.suffix.empty() && m.unk_token.empty() &&
                       m.subword_prefix.empty() && m.word_suffix.empty() && !m.byte_fallback &&
                       plain_added;
  if (classic) return;
  json added_flags = json::array();
  for (const AddedToken& t : m.added)
    added_flags.push_back({t.id, t.special, t.lstrip, t.rstrip, t.single_word, t.normalized});
  const json cfg = {
      {"normalizer", member_or_null(j, "normalizer")},
      {"pre_tokenizer", member_or_null(j, "pre_tokenizer")},
      {"byte_level", m.byte_level},
      {"template", {m.post.prefix, m.post.suffix}},
      {"model", {m.unk_token, m.subword_prefix, m.word_suffix, m.fuse_unk, m.byte_fallback}},
      {"added", added_flags}};
  m.pipeline = cfg.dump();
}

}  // namespace

Tokenizer Tokenizer::from_json_text(const std::string& text, const std::string& origin) {
  using nlohmann::json;
  // The one JSON policy refuses duplicate vocabulary keys and deep nesting while parsing.
  const json j =
      parse_json(text, fmt::format("'{}'", origin), "expected a Hugging Face tokenizer.json");
  try {
    auto m = std::make_unique<Impl>();
    read_model_options(*m, j, origin);
    read_pipeline(*m, j, origin);
    read_vocabulary(*m, j, origin);
    read_merges(*m, j["model"], origin);
    set_pipeline_for_hash(*m, j);
    m->finalize("'" + origin + "'");
    return Tokenizer(std::move(m));
  } catch (const json::exception& e) {
    fail("'{}': unexpected tokenizer.json structure: {}", origin, e.what());
  }
}

// ================================ saving ================================

std::string Tokenizer::to_json() const {
  using nlohmann::json;
  const Impl& m = *impl_;
  if (!m.classic())
    fail(
        "only a byte-level BPE over a split regex can be written as tokenizer.json (this one has "
        "a normalizer, pre-tokenizer, template or model options that would be lost)");
  auto q = [](const std::string& s) { return json(s).dump(); };
  std::string o;
  o.reserve(m.tokens.size() * 24 + m.merges.size() * 24 + 1024);
  o += "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  o += "  \"added_tokens\": [";
  bool first = true;
  for (uint32_t id = 0; id < m.tokens.size(); ++id) {
    if (m.kind[id] != kSpecial) continue;
    o += first ? "\n" : ",\n";
    first = false;
    o += fmt::format(
        "    {{\"id\": {}, \"content\": {}, \"single_word\": false, \"lstrip\": false, "
        "\"rstrip\": false, \"normalized\": false, \"special\": true}}",
        id, q(m.tokens[id]));
  }
  o += first ? "],\n" : "\n  ],\n";
  o += "  \"normalizer\": null,\n";
  o += "  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
       "\"pattern\": {\"Regex\": " +
       q(m.pattern) +
       "}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
       "\"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}]},\n";
  o += "  \"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, "
       "\"trim_offsets\": false, \"use_regex\": true},\n";
  o += "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": "
       "true, \"use_regex\": true},\n";
  o += "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
       "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
       "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n";
  o += fmt::format("    \"ignore_merges\": {},\n", m.ignore_merges ? "true" : "false");
  o += "    \"vocab\": {";
  first = true;
  for (uint32_t id = 0; id < m.tokens.size(); ++id) {
    if (m.kind[id] != kNormal) continue;
    o += first ? "\n      " : ",\n      ";
    first = false;
    o += q(bytes_to_unicode(m.tokens[id]));
    o += ": ";
    o += std::to_string(id);
  }
  o += first ? "},\n" : "\n    },\n";
  o += "    \"merges\": [";
  first = true;
  for (auto [a, b] : m.merges) {
    o += first ? "\n      " : ",\n      ";
    first = false;
    o += q(bytes_to_unicode(m.tokens[a]) + " " + bytes_to_unicode(m.tokens[b]));
  }
  o += first ? "]\n  }\n}\n" : "\n    ]\n  }\n}\n";
  return o;
}

void Tokenizer::save_json(const std::string& path) const {
  for (uint32_t id : impl_->specials)
    if (!utf8::valid(impl_->tokens[id]))
      fail("cannot save '{}': special token {} is not valid UTF-8", path, id);
  std::string text = to_json();
  std::string tmp = path + ".tmp";
  {
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) fail("cannot write '{}': {}", tmp, std::strerror(errno));
    bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = (std::fflush(f) == 0) && ok;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) {
      std::remove(tmp.c_str());
      fail("cannot write '{}': {}", tmp, std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno));
  }
}

}  // namespace marin
