// Mixture loader and validation source over token shards (see loader.hpp and docs/data.md).
#include "data/loader.hpp"

#include <fmt/core.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/hash.hpp"

namespace marin {

using nlohmann::json;

namespace {

// Emits tokens [offset, offset + take) of document `local` of shard s into a row, with labels
// (the next token of the same document, −1 after its last token).
void emit(const TokenShard& s, uint64_t local, uint64_t offset, uint64_t take, int32_t* tok,
          int32_t* lab) {
  const uint64_t begin = s.doc_begin(local), n = s.doc_size(local);
  s.copy(begin + offset, take, tok);
  for (uint64_t i = 0; i + 1 < take; ++i) lab[i] = tok[i + 1];
  lab[take - 1] = offset + take < n ? static_cast<int32_t>(s.token(begin + offset + take)) : -1;
}

void pad(int64_t n, int32_t* tok, int32_t* lab, int32_t* seg) {
  for (int64_t i = 0; i < n; ++i) tok[i] = 0, lab[i] = -1, seg[i] = -1;
}

template <class T>
T field(const json& s, const char* key, const char* what) {
  if (!s.contains(key)) fail("{} state: missing field '{}'", what, key);
  try {
    return s[key].get<T>();
  } catch (const json::exception& e) {
    fail("{} state: field '{}': {}", what, key, e.what());
  }
}

constexpr uint64_t kMixTag = 0x6d69787475726521ull;  // "mixture!"
constexpr uint64_t kOrderTag = 0x6f726465722d2d21ull;

}  // namespace

// ---- one source's stream of documents -----------------------------------------------------------

struct MixtureLoader::Stream {
  SourceStats st;
  std::vector<TokenShard> shards;
  std::vector<uint64_t> first_doc;  // prefix sums of documents per shard (size shards + 1)
  uint64_t name_key = 0, seed = 0;
  FeistelPermutation perm;

  void set_epoch(uint64_t e) {
    st.epoch = e;
    perm = FeistelPermutation(
        st.documents,
        FeistelPermutation::mix(FeistelPermutation::mix(seed ^ kOrderTag, name_key), e));
  }
  // The document at position pos of the current epoch: its shard and index in the shard.
  std::pair<const TokenShard*, uint64_t> doc_at(uint64_t pos) const {
    const uint64_t g = perm(pos);
    const size_t k =
        std::upper_bound(first_doc.begin(), first_doc.end(), g) - first_doc.begin() - 1;
    return {&shards[k], g - first_doc[k]};
  }
  void advance() {
    st.offset = 0;
    if (++st.pos == st.documents) {
      st.pos = 0;
      set_epoch(st.epoch + 1);
    }
  }
  void fill_row(int64_t S, int32_t* tok, int32_t* lab, int32_t* seg) {
    int64_t filled = 0;
    int32_t id = 0;
    while (filled < S) {
      auto [shard, local] = doc_at(st.pos);
      const uint64_t n = shard->doc_size(local);
      if (st.offset >= n) {  // an empty document
        advance();
        continue;
      }
      const uint64_t take = std::min<uint64_t>(n - st.offset, uint64_t(S - filled));
      emit(*shard, local, st.offset, take, tok + filled, lab + filled);
      std::fill(seg + filled, seg + filled + take, id++);
      filled += int64_t(take);
      st.offset += take;
      if (st.offset == n) advance();
    }
    st.rows += 1;
  }
};

// ---- mixture loader -----------------------------------------------------------------------------

MixtureLoader::MixtureLoader(const MixtureConfig& config, const LoaderOptions& opts) : opts_(opts) {
  MARIN_CHECK(opts.seq_len > 0, "loader: seq_len must be positive (got {})", opts.seq_len);
  MARIN_CHECK(opts.rows_per_step > 0, "loader: rows_per_step must be positive (got {})",
              opts.rows_per_step);
  MARIN_CHECK(opts.mix_block > 0, "loader: mix_block must be positive (got {})", opts.mix_block);
  config.validate();
  config_ = config.resolved(opts.total_steps);
  const TokenManifest m = TokenManifest::load(opts.token_dir);
  config_.check_against(m);
  const uint64_t hash = opts.tokenizer_hash ? opts.tokenizer_hash : m.tokenizer_hash;
  if (hash != m.tokenizer_hash)
    fail(
        "token directory {}: made with tokenizer hash {} but the tokenizer in use has hash "
        "{}; re-run `marin tokenize` with this tokenizer",
        opts.token_dir, hex64(m.tokenizer_hash), hex64(hash));
  for (const MixtureSource& src : config_.sources) {
    auto s = std::make_unique<Stream>();
    s->st.name = src.name;
    s->st.domain = src.domain;
    s->st.split = src.split;
    s->seed = opts.seed;
    s->name_key = XXH64(src.name.data(), src.name.size(), 0);
    s->first_doc.push_back(0);
    for (const TokenShardInfo& info : m.find(src.domain, src.split)) {
      TokenShard sh = m.open(info, hash, opts.vocab_size);
      s->st.documents += sh.documents();
      s->st.tokens += sh.tokens();
      s->first_doc.push_back(s->st.documents);
      s->shards.push_back(std::move(sh));
    }
    if (s->st.tokens == 0)
      fail("loader: source '{}' ({} {}) has no tokens in {}", src.name, src.domain, src.split,
           opts.token_dir);
    s->set_epoch(0);
    streams_.push_back(std::move(s));
  }
  for (const MixturePhase& p : config_.phases) {
    double sum = 0;
    for (double w : p.weights) sum += w;
    std::vector<double> cum;
    double acc = 0;
    for (double w : p.weights) cum.push_back((acc += w) / sum);
    cum.back() = 1.0;
    cumulative_.push_back(std::move(cum));
  }
}

MixtureLoader::~MixtureLoader() = default;

// Row r is position q = perm_b(r mod K) of mixing block b = r / K. The block's K slots are split
// into runs of floor(K·c_i + u_b) − floor(K·c_{i−1} + u_b) slots for source i (c = cumulative
// weights, u_b uniform per block): every block holds each source within one row of its weight,
// and the random offset makes the expected count exactly K·w_i.
int MixtureLoader::source_of_row(int64_t r) const {
  const int phase = config_.phase_at(r / opts_.rows_per_step);
  const std::vector<double>& cum = cumulative_[phase];
  const uint64_t K = uint64_t(opts_.mix_block), b = uint64_t(r) / K;
  const uint64_t key = FeistelPermutation::mix(opts_.seed ^ kMixTag, b);
  const double u = double(FeistelPermutation::mix(key) >> 11) * 0x1.0p-53;
  const double q = double(FeistelPermutation(K, key)(uint64_t(r) % K));
  for (size_t i = 0; i + 1 < cum.size(); ++i)
    if (q < std::floor(double(K) * cum[i] + u)) return int(i);
  return int(cum.size()) - 1;
}

void MixtureLoader::next(int B, int32_t* tokens, int32_t* labels, int32_t* seg) {
  const int64_t S = opts_.seq_len;
  last_sources_.resize(B);
  for (int b = 0; b < B; ++b) {
    const int k = source_of_row(row_);
    last_sources_[b] = k;
    streams_[k]->fill_row(S, tokens + b * S, labels + b * S, seg + b * S);
    ++row_;
  }
}

json MixtureLoader::state() const {
  json src = json::object();
  for (const auto& s : streams_)
    src[s->st.name] = {{"domain", s->st.domain},       {"split", s->st.split},
                       {"documents", s->st.documents}, {"tokens", s->st.tokens},
                       {"epoch", s->st.epoch},         {"pos", s->st.pos},
                       {"offset", s->st.offset},       {"rows", s->st.rows}};
  return {{"kind", "mixture"},
          {"version", 1},
          {"seed", opts_.seed},
          {"seq_len", opts_.seq_len},
          {"rows_per_step", opts_.rows_per_step},
          {"mix_block", opts_.mix_block},
          {"row", row_},
          {"sources", src}};
}

void MixtureLoader::restore(const json& s) {
  const char* what = "mixture loader";
  if (!s.is_object() || s.value("kind", "") != "mixture")
    fail("mixture loader state: expected kind \"mixture\", got {}",
         s.is_object() && s.contains("kind") ? s["kind"].dump() : "none");
  if (field<int>(s, "version", what) != 1) fail("mixture loader state: unsupported version");
  auto same = [&](const char* key, auto mine) {
    const auto theirs = field<decltype(mine)>(s, key, what);
    if (theirs != mine)
      fail(
          "mixture loader state: {} is {} in the saved state but {} now; the run must resume "
          "with the data settings it started with",
          key, theirs, mine);
  };
  same("seed", opts_.seed);
  same("seq_len", opts_.seq_len);
  same("rows_per_step", opts_.rows_per_step);
  same("mix_block", opts_.mix_block);
  const int64_t row = field<int64_t>(s, "row", what);
  if (row < 0) fail("mixture loader state: row {} is negative", row);
  const json src = field<json>(s, "sources", what);
  if (!src.is_object() || src.size() != streams_.size())
    fail("mixture loader state: has {} sources, the mixture has {}",
         src.is_object() ? src.size() : 0, streams_.size());
  std::vector<SourceStats> next;
  for (const auto& st : streams_) {
    if (!src.contains(st->st.name))
      fail("mixture loader state: no position for source '{}'", st->st.name);
    const json& j = src[st->st.name];
    SourceStats x = st->st;
    const std::string w = "mixture loader source '" + st->st.name + "'";
    if (field<uint64_t>(j, "documents", w.c_str()) != x.documents ||
        field<uint64_t>(j, "tokens", w.c_str()) != x.tokens)
      fail("{}: saved with {} documents / {} tokens, the shards now hold {} / {}", w,
           j["documents"].dump(), j["tokens"].dump(), x.documents, x.tokens);
    x.epoch = field<uint64_t>(j, "epoch", w.c_str());
    x.pos = field<uint64_t>(j, "pos", w.c_str());
    x.offset = field<uint64_t>(j, "offset", w.c_str());
    x.rows = field<uint64_t>(j, "rows", w.c_str());
    if (x.pos >= x.documents) fail("{}: position {} ≥ {} documents", w, x.pos, x.documents);
    next.push_back(x);
  }
  for (size_t i = 0; i < streams_.size(); ++i) {
    Stream& st = *streams_[i];
    st.st = next[i];
    st.set_epoch(next[i].epoch);
    auto [shard, local] = st.doc_at(st.st.pos);
    if (st.st.offset >= shard->doc_size(local) && shard->doc_size(local) > 0)
      fail(
          "mixture loader source '{}': offset {} is past the end of its current document ({} "
          "tokens)",
          st.st.name, st.st.offset, shard->doc_size(local));
  }
  row_ = row;
}

std::string MixtureLoader::describe() const {
  std::string out = fmt::format("mixture of {} source(s) from {} (seq_len {}, seed {}",
                                streams_.size(), opts_.token_dir, opts_.seq_len, opts_.seed);
  out += fmt::format(", {} phase(s))", config_.phases.size());
  for (const auto& s : streams_)
    out += fmt::format("; {} = {}/{}: {} docs, {} tokens", s->st.name, s->st.domain, s->st.split,
                       s->st.documents, s->st.tokens);
  return out;
}

std::vector<SourceStats> MixtureLoader::stats() const {
  std::vector<SourceStats> v;
  for (const auto& s : streams_) v.push_back(s->st);
  return v;
}

// ---- validation source --------------------------------------------------------------------------

namespace {

std::vector<TokenShard> open_shards(const std::vector<std::string>& paths, uint64_t tokenizer_hash,
                                    uint32_t vocab_size) {
  std::vector<TokenShard> out;
  for (const std::string& p : paths) out.push_back(TokenShard::open(p, tokenizer_hash, vocab_size));
  return out;
}

}  // namespace

ValidationSource::ValidationSource(const std::vector<std::string>& paths, int64_t seq_len,
                                   uint64_t tokenizer_hash, uint32_t vocab_size)
    : ValidationSource(open_shards(paths, tokenizer_hash, vocab_size), seq_len) {}

ValidationSource::ValidationSource(std::vector<TokenShard> shards, int64_t seq_len)
    : seq_len_(seq_len) {
  MARIN_CHECK(seq_len > 0, "validation source: seq_len must be positive (got {})", seq_len);
  MARIN_CHECK(!shards.empty(), "validation source: no shards given");
  for (TokenShard& s : shards) {
    documents_ += s.documents();
    tokens_ += s.tokens();
    text_bytes_ += s.header().text_bytes;
    for (uint64_t d = 0; d < s.documents(); ++d) scored_ += s.doc_size(d) ? s.doc_size(d) - 1 : 0;
    shards_.push_back(std::move(s));
  }
  total_rows_ = int64_t((tokens_ + uint64_t(seq_len) - 1) / uint64_t(seq_len));
}

ValidationSource::~ValidationSource() = default;

std::unique_ptr<ValidationSource> ValidationSource::for_domain(const std::string& token_dir,
                                                               const std::string& domain,
                                                               int64_t seq_len, uint64_t hash,
                                                               uint32_t vocab_size,
                                                               const std::string& split) {
  const TokenManifest m = TokenManifest::load(token_dir);
  std::vector<TokenShard> shards;
  for (const TokenShardInfo& i : m.find(domain, split))
    shards.push_back(m.open(i, hash ? hash : m.tokenizer_hash, vocab_size));
  if (shards.empty())
    fail("token directory {}: domain '{}' has no {} shards", token_dir, domain, split);
  return std::make_unique<ValidationSource>(std::move(shards), seq_len);
}

void ValidationSource::next(int B, int32_t* tokens, int32_t* labels, int32_t* seg) {
  const int64_t S = seq_len_;
  for (int b = 0; b < B; ++b, ++row_) {
    int32_t *tok = tokens + b * S, *lab = labels + b * S, *sg = seg + b * S;
    int64_t filled = 0;
    int32_t id = 0;
    while (filled < S && shard_ < shards_.size()) {
      const TokenShard& sh = shards_[shard_];
      if (doc_ >= sh.documents()) {
        ++shard_, doc_ = 0, offset_ = 0;
        continue;
      }
      const uint64_t n = sh.doc_size(doc_);
      const uint64_t take = std::min<uint64_t>(n - offset_, uint64_t(S - filled));
      if (take > 0) {
        emit(sh, doc_, offset_, take, tok + filled, lab + filled);
        std::fill(sg + filled, sg + filled + take, id++);
        filled += int64_t(take);
        offset_ += take;
      }
      if (offset_ == n) ++doc_, offset_ = 0;
    }
    pad(S - filled, tok + filled, lab + filled, sg + filled);
  }
}

json ValidationSource::state() const {
  return {
      {"kind", "validation"}, {"row", row_}, {"shard", shard_}, {"doc", doc_}, {"offset", offset_}};
}

void ValidationSource::restore(const json& s) {
  const char* what = "validation source";
  if (!s.is_object() || s.value("kind", "") != "validation")
    fail("validation source state: expected kind \"validation\"");
  const auto row = field<int64_t>(s, "row", what);
  const auto shard = field<size_t>(s, "shard", what);
  const auto doc = field<uint64_t>(s, "doc", what);
  const auto offset = field<uint64_t>(s, "offset", what);
  if (row < 0 || shard > shards_.size() ||
      (shard < shards_.size() && (doc > shards_[shard].documents() ||
                                  (doc < shards_[shard].documents() &&
                                   offset >= std::max<uint64_t>(1, shards_[shard].doc_size(doc))))))
    fail("validation source state: position (shard {}, doc {}, offset {}) is outside the shards",
         shard, doc, offset);
  row_ = row, shard_ = shard, doc_ = doc, offset_ = offset;
}

std::string ValidationSource::describe() const {
  return fmt::format("validation: {} shard(s), {} documents, {} tokens, {} rows of {}",
                     shards_.size(), documents_, tokens_, total_rows_, seq_len_);
}

}  // namespace marin
