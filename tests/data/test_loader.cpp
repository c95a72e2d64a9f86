// Token shards, mixture config, mixture loader and validation source (docs/data.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "data/feistel.hpp"
#include "data/loader.hpp"
#include "data/mixture.hpp"
#include "data/shards.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;
using marin::testing::TempDir;
using nlohmann::json;

namespace {

using marin::testing::error_of;

#define EXPECT_ERROR(expr, ...)                                                               \
  do {                                                                                        \
    const std::string msg_ = error_of([&] { (void)(expr); });                                 \
    ASSERT_FALSE(msg_.empty()) << "no marin::Error from " #expr;                              \
    for (const std::string& part_ : std::initializer_list<std::string>{__VA_ARGS__})          \
      EXPECT_NE(msg_.find(part_), std::string::npos) << "'" << part_ << "' not in: " << msg_; \
  } while (0)

constexpr uint64_t kHash = 0x1234abcd5678ef00ull;
constexpr uint32_t kVocab = 60000;
constexpr uint32_t kEos = kVocab - 1;

// Token value of document k of domain d: every document is [v, v, ..., v, EOS], so a token tells
// which document it came from.
uint32_t doc_value(int d, uint64_t k) {
  return 1 + uint32_t(d) * 10000 + uint32_t(k);
}
uint64_t doc_length(int d, uint64_t k) {
  return 1 + (k * 7 + uint64_t(d) * 3) % 23;
}

// A token directory with domains "a", "b", "c" ... (train: `docs` documents over two shards;
// valid: 5 documents) and its manifest.
void make_token_dir(const fs::path& dir, int domains, uint64_t docs) {
  marin::TokenManifest m;
  m.dir = dir.string();
  m.tokenizer_hash = kHash;
  m.vocab_size = kVocab;
  for (int d = 0; d < domains; ++d) {
    const std::string name(1, char('a' + d));
    fs::create_directories(dir / name);
    auto write = [&](const std::string& split, int index, uint64_t first, uint64_t count) {
      std::vector<uint64_t> off{0};
      std::vector<uint32_t> tok;
      for (uint64_t k = first; k < first + count; ++k) {
        for (uint64_t i = 0; i + 1 < doc_length(d, k); ++i) tok.push_back(doc_value(d, k));
        tok.push_back(kEos);
        off.push_back(tok.size());
      }
      marin::TokenShardInfo info{fmt::format("{}/{}-{:05d}.tok", name, split, index),
                                 name,
                                 split,
                                 count,
                                 tok.size(),
                                 tok.size() * 3};
      marin::write_token_shard(m.path(info), kVocab, kHash, info.bytes, off, tok);
      m.shards.push_back(info);
    };
    write("train", 0, 0, docs / 2);
    write("train", 1, docs / 2, docs - docs / 2);
    write("valid", 0, 5000, 5);
  }
  marin::write_file_atomic((dir / "manifest.json").string(), m.to_json().dump(2));
}

struct Batch {
  std::vector<int32_t> tok, lab, seg;
  std::vector<int> src;
};

Batch take(marin::BatchSource& s, int B, int64_t S) {
  Batch b;
  b.tok.resize(B * S);
  b.lab.resize(B * S);
  b.seg.resize(B * S);
  s.next(B, b.tok.data(), b.lab.data(), b.seg.data());
  if (auto* m = dynamic_cast<marin::MixtureLoader*>(&s))
    b.src.assign(m->last_sources().begin(), m->last_sources().end());
  return b;
}

marin::LoaderOptions options(const fs::path& dir, int64_t seq_len, int64_t rows_per_step) {
  marin::LoaderOptions o;
  o.token_dir = dir.string();
  o.seq_len = seq_len;
  o.rows_per_step = rows_per_step;
  o.seed = 17;
  o.tokenizer_hash = kHash;
  o.vocab_size = kVocab;
  return o;
}

}  // namespace

// ---- Feistel ------------------------------------------------------------------------------------

TEST(Feistel, IsAPermutationForManySizes) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 7ull, 8ull, 100ull, 1000ull, 1023ull, 1024ull, 1025ull,
                     4097ull, 65537ull}) {
    for (uint64_t key : {0ull, 1ull, 0xdeadbeefull}) {
      marin::FeistelPermutation p(n, key);
      std::vector<char> seen(n, 0);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t j = p(i);
        ASSERT_LT(j, n) << "n=" << n;
        ASSERT_EQ(seen[j], 0) << "n=" << n << " key=" << key << ": " << j << " hit twice";
        seen[j] = 1;
      }
    }
  }
}

TEST(Feistel, DependsOnTheKeyAndShuffles) {
  const uint64_t n = 1000;
  marin::FeistelPermutation a(n, 1), b(n, 2);
  uint64_t differ = 0, fixed = 0;
  for (uint64_t i = 0; i < n; ++i) {
    differ += a(i) != b(i);
    fixed += a(i) == i;
  }
  EXPECT_GT(differ, 950u);  // two keys: nearly every position differs
  EXPECT_LT(fixed, 20u);    // not close to the identity
  // Neighbouring positions land far apart (it is a shuffle, not a rotation).
  uint64_t adjacent = 0;
  for (uint64_t i = 0; i + 1 < n; ++i) adjacent += (a(i + 1) == a(i) + 1);
  EXPECT_LT(adjacent, 20u);
}

// ---- token shards -------------------------------------------------------------------------------

TEST(TokenShard, RoundTripUint16AndUint32) {
  TempDir tmp("shard-rt");
  for (uint32_t vocab : {300u, 65536u, 100000u}) {
    const std::string path = tmp.str("s.tok");
    std::vector<uint32_t> tok = {5, 7, 9, vocab - 1, 0, 1, 2};
    std::vector<uint64_t> off = {0, 3, 3, 7};  // includes an empty document
    marin::write_token_shard(path, vocab, kHash, 42, off, tok);
    marin::TokenShard s = marin::TokenShard::open(path, kHash, vocab);
    EXPECT_EQ(s.header().token_bytes, vocab <= 65536 ? 2u : 4u);
    EXPECT_EQ(s.documents(), 3u);
    EXPECT_EQ(s.tokens(), 7u);
    EXPECT_EQ(s.header().text_bytes, 42u);
    EXPECT_EQ(s.header().vocab_size, vocab);
    EXPECT_EQ(s.document(0), (std::vector<uint32_t>{5, 7, 9}));
    EXPECT_TRUE(s.document(1).empty());
    EXPECT_EQ(s.document(2), (std::vector<uint32_t>{vocab - 1, 0, 1, 2}));
    EXPECT_EQ(fs::file_size(path), 64u + 8 * 4 + 7 * s.header().token_bytes);
  }
}

TEST(TokenShard, BadInputsAreNamedErrors) {
  TempDir tmp("shard-bad");
  const std::string good = tmp.str("good.tok");
  marin::write_token_shard(good, 300, kHash, 10, std::vector<uint64_t>{0, 2, 4},
                           std::vector<uint32_t>{1, 2, 3, 4});
  const std::string bytes = marin::read_file(good);
  auto variant = [&](const std::string& name, std::string content) {
    const std::string p = tmp.str(name);
    std::ofstream(p, std::ios::binary) << content;
    return p;
  };
  EXPECT_ERROR(marin::TokenShard::open(tmp.str("missing.tok"), kHash), "missing.tok",
               "cannot open");
  const std::string cut = variant("cut.tok", bytes.substr(0, bytes.size() - 3));
  EXPECT_ERROR(marin::TokenShard::open(cut, kHash), "cut.tok", "truncated");
  const std::string tiny = variant("tiny.tok", bytes.substr(0, 20));
  EXPECT_ERROR(marin::TokenShard::open(tiny, kHash), "tiny.tok", "truncated");
  const std::string longer = variant("long.tok", bytes + "xx");
  EXPECT_ERROR(marin::TokenShard::open(longer, kHash), "long.tok", "trailing");
  std::string m = bytes;
  m[0] = 'X';
  EXPECT_ERROR(marin::TokenShard::open(variant("magic.tok", m), kHash), "magic.tok", "magic",
               "MARINTOK");
  std::string v = bytes;
  v[8] = 9;
  EXPECT_ERROR(marin::TokenShard::open(variant("version.tok", v), kHash), "version.tok",
               "version 9");
  EXPECT_ERROR(marin::TokenShard::open(good, kHash + 1), "good.tok", "tokenizer hash",
               fmt::format("{:016x}", kHash), fmt::format("{:016x}", kHash + 1));
  EXPECT_ERROR(marin::TokenShard::open(good, kHash, 512), "good.tok", "vocab size 300", "512");
  std::string t = bytes;
  t[64 + 24] = char(0xff), t[64 + 25] = char(0xff);  // first token 65535 ≥ vocab 300
  EXPECT_ERROR(marin::TokenShard::open(variant("token.tok", t), kHash), "token.tok",
               "outside the vocabulary");
  EXPECT_NO_THROW(marin::TokenShard::open(good, kHash, 300));
}

// ---- tokenize -----------------------------------------------------------------------------------

namespace {

// A small text corpus: two domains, train and valid shards.
std::map<std::string, std::vector<std::string>> make_corpus(const fs::path& root) {
  std::map<std::string, std::vector<std::string>> texts;  // "domain/split-NNNNN" -> texts
  const char* words[] = {"the",    "quick", "brown", "fox",   "jumps", "över", "lazy",
                         "dog",    "{",     "}",     "int",   "main",  "(",    ")",
                         "return", "0;",    "\n",    "héllo", "wörld"};
  int k = 0;
  for (std::string domain : {"prose", "code"}) {
    fs::create_directories(root / domain);
    for (std::string shard : {"train-00000", "train-00001", "valid-00000"}) {
      std::ofstream f(root / domain / (shard + ".jsonl"));
      for (int d = 0; d < 12; ++d, ++k) {
        std::string text;
        for (int w = 0; w < 5 + (k * 13) % 40; ++w)
          text += std::string(words[(k + w * w) % 19]) + " ";
        if (d == 3) text = "";  // an empty document
        texts[domain + "/" + shard].push_back(text);
        f << json{{"id", domain + std::to_string(k)}, {"text", text}}.dump() << "\n";
      }
    }
  }
  return texts;
}

}  // namespace

TEST(Tokenize, ShardsDecodeToTheTextPlusEos) {
  TempDir tmp("tokenize");
  const auto texts = make_corpus(tmp.path / "corpus");
  std::vector<std::string> all;
  for (const auto& [k, v] : texts) all.insert(all.end(), v.begin(), v.end());
  const marin::Tokenizer tok = marin::Tokenizer::train(all, 300);
  ASSERT_TRUE(tok.eos().has_value());
  marin::TokenizeOptions o;
  o.corpus = tmp.str("corpus");
  o.out = tmp.str("tok");
  o.progress = false;
  const marin::TokenManifest m = marin::tokenize_corpus(tok, o);
  ASSERT_EQ(m.shards.size(), 6u);
  const marin::TokenManifest back = marin::TokenManifest::load(tmp.str("tok"));
  EXPECT_EQ(back.tokenizer_hash, tok.hash());
  EXPECT_EQ(back.vocab_size, tok.vocab_size());
  EXPECT_EQ(back.domains(), (std::vector<std::string>{"code", "prose"}));
  ASSERT_EQ(back.shards.size(), 6u);
  for (const marin::TokenShardInfo& info : back.shards) {
    const std::string key = info.file.substr(0, info.file.size() - 4);
    ASSERT_TRUE(texts.count(key)) << key;
    const auto& want = texts.at(key);
    marin::TokenShard s = marin::TokenShard::open(back.path(info), tok.hash(), tok.vocab_size());
    ASSERT_EQ(s.documents(), want.size());
    EXPECT_EQ(info.documents, want.size());
    EXPECT_EQ(info.tokens, s.tokens());
    uint64_t bytes = 0;
    for (size_t d = 0; d < want.size(); ++d) {
      std::vector<uint32_t> ids = s.document(d);
      ASSERT_FALSE(ids.empty());
      EXPECT_EQ(ids.back(), *tok.eos());
      ids.pop_back();
      EXPECT_EQ(tok.decode(ids), want[d]);
      bytes += want[d].size();
    }
    EXPECT_EQ(info.bytes, bytes);
    EXPECT_EQ(s.header().text_bytes, bytes);
  }
  // Only the valid split.
  o.out = tmp.str("tok-valid");
  o.splits = {"valid"};
  EXPECT_EQ(marin::tokenize_corpus(tok, o).shards.size(), 2u);
}

TEST(Tokenize, MalformedLineNamesFileAndLine) {
  TempDir tmp("tokenize-bad");
  fs::create_directories(tmp.path / "corpus" / "x");
  std::ofstream(tmp.path / "corpus" / "x" / "train-00000.jsonl")
      << "{\"id\": \"1\", \"text\": \"ok\"}\n{\"id\": \"2\", \"txt\": \"no\"}\n";
  const marin::Tokenizer tok = marin::Tokenizer::train({"ok ok ok"}, 270);
  marin::TokenizeOptions o{tmp.str("corpus"), tmp.str("tok"), {"train"}, 2, false};
  EXPECT_ERROR(marin::tokenize_corpus(tok, o), "train-00000.jsonl:2", "\"text\"");
  o.corpus = tmp.str("nope");
  EXPECT_ERROR(marin::tokenize_corpus(tok, o), "nope", "not a directory");
}

TEST(Tokenize, CliWritesShardsAndFailsCleanly) {
  TempDir tmp("tokenize-cli");
  const auto texts = make_corpus(tmp.path / "corpus");
  marin::Tokenizer::train({"the quick brown fox"}, 280).save_json(tmp.str("tokenizer.json"));
  auto r = marin::testing::run("tokenize --tokenizer " + tmp.str("tokenizer.json") + " --corpus " +
                               tmp.str("corpus") + " --out " + tmp.str("tok") +
                               " --split train --threads 2");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(marin::TokenManifest::load(tmp.str("tok")).shards.size(), 4u);
  r = marin::testing::run("tokenize --tokenizer " + tmp.str("tokenizer.json") + " --corpus " +
                          tmp.str("missing") + " --out " + tmp.str("tok2"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("missing"), std::string::npos) << r.out;
}

// ---- mixture config -----------------------------------------------------------------------------

TEST(MixtureConfig, ParsesTomlWithPhases) {
  const auto c = marin::MixtureConfig::from_toml_text(R"(
[sources]
prose = { domain = "gutenberg" }
code = "code_python"

[[phase]]
start_step = 0
weights = { prose = 0.7, code = 0.3 }

[[phase]]
start_fraction = 0.28
weights = { prose = 1, code = 3 }

[[phase]]
start_fraction = 0.8
weights = { code = 1 }
)",
                                                      "mix.toml");
  ASSERT_EQ(c.sources.size(), 2u);
  EXPECT_EQ(c.sources[c.source_index("prose")].domain, "gutenberg");
  EXPECT_EQ(c.sources[c.source_index("code")].domain, "code_python");
  ASSERT_EQ(c.phases.size(), 3u);
  EXPECT_EQ(c.phases[2].weights[c.source_index("prose")], 0.0);
  EXPECT_TRUE(c.needs_total_steps());
  EXPECT_ERROR(c.resolved(0), "mix.toml", "total steps");
  const auto r = c.resolved(1000);
  EXPECT_EQ(r.phases[1].start_step, 280);
  EXPECT_EQ(r.phases[2].start_step, 800);
  EXPECT_EQ(r.phase_at(279), 0);
  EXPECT_EQ(r.phase_at(280), 1);
  EXPECT_EQ(r.phase_at(10000), 2);
  // The JSON form round-trips.
  const auto j = marin::MixtureConfig::from_json(r.to_json(), "j");
  EXPECT_EQ(j.to_json(), r.to_json());
  // Shorthand: one phase, sources named by domain.
  const auto s = marin::MixtureConfig::from_json(json{{"weights", {{"a", 1}, {"b", 2}}}});
  EXPECT_EQ(s.sources.size(), 2u);
  EXPECT_EQ(s.sources[1].domain, "b");
}

TEST(MixtureConfig, BadConfigsAreNamedErrors) {
  auto toml = [](const std::string& t) {
    return marin::MixtureConfig::from_toml_text(t, "m.toml");
  };
  EXPECT_ERROR(toml("weights = { a = 1, b = -0.5 }"), "m.toml", "'b'", "negative");
  EXPECT_ERROR(toml("weights = { a = 0, b = 0 }"), "m.toml", "all zero");
  // Relative weights stay in a range where their sum neither overflows nor rounds a source away.
  EXPECT_ERROR(toml("weights = { a = 1e308, b = 1e308 }"), "m.toml", "'a' is 1e+308",
               "a weight is 0 or in [1e-06, 1e+06]");
  EXPECT_ERROR(toml("weights = { a = 1, b = 1e-300 }"), "m.toml", "'b' is 1e-300");
  EXPECT_ERROR(toml("weights = { a = 1, b = inf }"), "m.toml", "weights.b");
  EXPECT_EQ(toml("weights = { a = 1e6, b = 1e-6, c = 0 }").sources.size(), 3u);
  EXPECT_ERROR(toml("weights = { a = 'x' }"), "m.toml", "weights.a", "number");
  EXPECT_ERROR(toml("wieghts = { a = 1 }"), "m.toml", "unknown field 'wieghts'");
  EXPECT_ERROR(toml("[sources]\na = 'x'\n[[phase]]\nweights = { b = 1 }"), "m.toml", "source 'b'",
               "not in [sources]");
  EXPECT_ERROR(toml("[[phase]]\nstart_step = 5\nweights = { a = 1 }"), "m.toml", "step 0");
  EXPECT_ERROR(toml("[[phase]]\nweights = { a = 1 }\n[[phase]]\nweights = { a = 2 }"), "m.toml",
               "phase[1]", "start_step");
  EXPECT_ERROR(
      toml("[[phase]]\nweights = { a = 1 }\n[[phase]]\nstart_step = 0\nweights = { a = 2 }"),
      "m.toml", "phase[1] must start after");
  EXPECT_ERROR(toml("weights = { a = 1 "), "m.toml", "TOML error");
  TempDir tmp("mix-bad");
  EXPECT_ERROR(marin::MixtureConfig::load(tmp.str("none.toml")), "none.toml");
  // A source naming a domain that does not exist in the token directory.
  make_token_dir(tmp.path / "tok", 2, 10);
  const auto c = toml("[sources]\nx = { domain = 'zzz' }\n[[phase]]\nweights = { x = 1 }");
  EXPECT_ERROR(marin::MixtureLoader(c, options(tmp.path / "tok", 8, 1)), "m.toml", "source 'x'",
               "domain 'zzz'", "domains: a, b");
  EXPECT_ERROR(
      toml("[sources]\nx = { domain = 'a', split = 'bogus' }\n[[phase]]\nweights = { x = 1 }"),
      "m.toml", "sources.x.split", "'bogus'");
}

// ---- mixture loader -----------------------------------------------------------------------------

TEST(MixtureLoader, NoCrossDocumentAttentionAndDocumentsIntact) {
  TempDir tmp("loader-seg");
  make_token_dir(tmp.path / "tok", 3, 40);
  const auto c = marin::MixtureConfig::from_json(json{{"weights", {{"a", 1}, {"b", 1}, {"c", 2}}}});
  const int64_t S = 32;
  marin::MixtureLoader L(c, options(tmp.path / "tok", S, 8));
  // Per source: the concatenated stream of rows, to check continuation and per-epoch coverage.
  std::map<int, std::vector<int32_t>> stream;
  for (int call = 0; call < 60; ++call) {
    Batch b = take(L, 8, S);
    for (int r = 0; r < 8; ++r) {
      const int32_t* tok = &b.tok[r * S];
      const int32_t* lab = &b.lab[r * S];
      const int32_t* seg = &b.seg[r * S];
      ASSERT_EQ(seg[0], 0);
      for (int64_t i = 0; i < S; ++i) {
        ASSERT_GE(seg[i], 0);
        if (i > 0) {
          ASSERT_TRUE(seg[i] == seg[i - 1] || seg[i] == seg[i - 1] + 1);
        }
        const bool seg_ends = i + 1 == S || seg[i + 1] != seg[i];
        // A segment is one document: one value, its EOS only at its end, which closes it.
        if (i > 0 && seg[i] == seg[i - 1] && tok[i - 1] != int32_t(kEos) &&
            tok[i] != int32_t(kEos)) {
          ASSERT_EQ(tok[i], tok[i - 1]) << "two documents share segment " << seg[i];
        }
        if (tok[i] == int32_t(kEos)) {
          ASSERT_TRUE(seg_ends) << "EOS inside a segment";
          ASSERT_EQ(lab[i], -1) << "label across a document boundary";
        } else if (i + 1 < S) {
          ASSERT_FALSE(seg_ends) << "segment ends without EOS inside a row";
          ASSERT_EQ(lab[i], tok[i + 1]);
        } else {
          // Last position of a row mid-document: the label is the document's next token.
          ASSERT_TRUE(lab[i] == tok[i] || lab[i] == int32_t(kEos));
        }
        // The row's source matches the token's domain.
        if (tok[i] != int32_t(kEos)) {
          ASSERT_EQ((tok[i] - 1) / 10000, b.src[r]);
        }
      }
      stream[b.src[r]].insert(stream[b.src[r]].end(), tok, tok + S);
    }
  }
  // Rows of a source concatenate to whole documents, each exactly as stored, and every document
  // appears once per epoch (in a shuffled order).
  for (auto& [d, toks] : stream) {
    std::vector<uint64_t> order;
    size_t i = 0;
    while (true) {
      size_t j = i;
      while (j < toks.size() && toks[j] != int32_t(kEos)) ++j;
      if (j == toks.size()) break;
      const uint64_t k = (j > i) ? uint64_t(toks[i]) - doc_value(d, 0) : UINT64_MAX;
      if (k == UINT64_MAX) {
        // A one-token document (just EOS): identify it by length among the candidates.
        order.push_back(UINT64_MAX);
      } else {
        ASSERT_LT(k, 40u);
        ASSERT_EQ(j + 1 - i, doc_length(d, k)) << "document " << k << " of source " << d;
        order.push_back(k);
      }
      i = j + 1;
    }
    ASSERT_GE(order.size(), 40u) << "source " << d << " did not complete an epoch";
    std::set<uint64_t> first(order.begin(), order.begin() + 40);
    std::vector<uint64_t> want;
    for (uint64_t k = 0; k < 40; ++k) want.push_back(doc_length(d, k) == 1 ? UINT64_MAX : k);
    std::set<uint64_t> want_set(want.begin(), want.end());
    EXPECT_EQ(first, want_set) << "epoch 0 of source " << d << " is not a permutation";
    size_t ones = std::count(want.begin(), want.end(), UINT64_MAX);
    EXPECT_EQ(size_t(std::count(order.begin(), order.begin() + 40, UINT64_MAX)), ones);
    bool sorted = std::is_sorted(order.begin(), order.begin() + 40);
    EXPECT_FALSE(sorted) << "documents are not shuffled";
  }
  for (const auto& s : L.stats()) EXPECT_GE(s.epoch, 1u) << s.name;
}

TEST(MixtureLoader, RealisedProportionsMatchWeights) {
  // Proportions are counted in rows. Every row holds seq_len tokens of one source (checked from
  // the tokens themselves), so token proportions are the same.
  TempDir tmp("loader-mix");
  make_token_dir(tmp.path / "tok", 3, 30);
  const auto c =
      marin::MixtureConfig::from_json(json{{"weights", {{"a", 0.5}, {"b", 0.3}, {"c", 0.2}}}});
  const int64_t S = 4;
  auto o = options(tmp.path / "tok", S, 64);
  o.mix_block = 1024;
  marin::MixtureLoader L(c, o);
  const int calls = 320, B = 64;  // 20480 rows = 20 mixing blocks
  std::vector<double> rows(3, 0);
  for (int k = 0; k < calls; ++k) {
    Batch b = take(L, B, S);
    for (int r = 0; r < B; ++r) {
      rows[b.src[r]] += 1;
      for (int64_t i = 0; i < S; ++i) {
        const int32_t t = b.tok[r * S + i];
        if (t != int32_t(kEos)) {
          ASSERT_EQ((t - 1) / 10000, b.src[r]);
        }
      }
    }
  }
  const double w[3] = {0.5, 0.3, 0.2};
  for (int i = 0; i < 3; ++i) {
    const double p = rows[i] / (calls * B);
    EXPECT_NEAR(p, w[i], 0.01 * w[i]) << "source " << i << " (relative 1%)";
  }
  // A smaller window is close too (proportions are exact per block of 1024 rows up to rounding).
  std::vector<int> first(3, 0);
  for (int64_t r = 0; r < 1024; ++r) first[L.source_of_row(r)]++;
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(first[i], 1024 * w[i], 1.0);
}

TEST(MixtureLoader, ScheduleSwitchesAtTheConfiguredStep) {
  TempDir tmp("loader-sched");
  make_token_dir(tmp.path / "tok", 3, 20);
  const auto c = marin::MixtureConfig::from_toml_text(R"(
[[phase]]
weights = { a = 1 }
[[phase]]
start_step = 5
weights = { b = 1, c = 1 }
[[phase]]
start_fraction = 0.28
weights = { c = 1, a = 0 }
)",
                                                      "sched.toml");
  auto o = options(tmp.path / "tok", 8, 4);
  o.total_steps = 50;  // phase 2 at step 14
  marin::MixtureLoader L(c, o);
  // Micro-batches of 2 rows: a step is 4 rows however next() is called.
  for (int call = 0; call < 40; ++call) {
    const int64_t step = L.row() / 4;
    Batch b = take(L, 2, 8);
    for (int s : b.src) {
      if (step < 5)
        EXPECT_EQ(s, 0) << "step " << step;
      else if (step < 14)
        EXPECT_TRUE(s == 1 || s == 2) << "step " << step;
      else
        EXPECT_EQ(s, 2) << "step " << step;
    }
  }
  EXPECT_EQ(L.step(), 20);
}

TEST(MixtureLoader, ResumeIsExactAcrossEpochAndScheduleSwitch) {
  TempDir tmp("loader-resume");
  make_token_dir(tmp.path / "tok", 3, 12);
  const auto c = marin::MixtureConfig::from_toml_text(R"(
[[phase]]
weights = { a = 2, b = 1 }
[[phase]]
start_step = 6
weights = { a = 1, b = 1, c = 3 }
)",
                                                      "resume.toml");
  const int64_t S = 16;
  // 4 rows per step, 3 rows per call: the switch (step 6) is at row 24, in call 8; the cut is
  // after call 7 (row 21).
  const int B = 3, calls = 24, cut = 7;
  auto o = options(tmp.path / "tok", S, 4);
  marin::MixtureLoader full(c, o);
  std::vector<Batch> want;
  for (int k = 0; k < calls; ++k) want.push_back(take(full, B, S));

  marin::MixtureLoader first(c, o);
  for (int k = 0; k < cut; ++k) {
    Batch b = take(first, B, S);
    ASSERT_EQ(b.tok, want[k].tok);
  }
  const std::string saved = first.state().dump();
  const auto before = first.stats();
  marin::MixtureLoader resumed(c, o);
  resumed.restore(json::parse(saved));
  EXPECT_EQ(resumed.state().dump(), saved);
  EXPECT_LT(resumed.step(), 6);  // the switch happens after the resume
  for (int k = cut; k < calls; ++k) {
    Batch b = take(resumed, B, S);
    ASSERT_EQ(b.tok, want[k].tok) << "call " << k;
    ASSERT_EQ(b.lab, want[k].lab) << "call " << k;
    ASSERT_EQ(b.seg, want[k].seg) << "call " << k;
    ASSERT_EQ(b.src, want[k].src) << "call " << k;
  }
  EXPECT_EQ(resumed.state(), full.state());
  EXPECT_GE(resumed.step(), 6);
  // An epoch boundary was crossed after the resume, and source c only started after the switch.
  const auto after = resumed.stats();
  bool wrapped = false;
  for (size_t i = 0; i < after.size(); ++i) wrapped |= after[i].epoch > before[i].epoch;
  EXPECT_TRUE(wrapped);
  EXPECT_EQ(before[2].rows, 0u);
  EXPECT_GT(after[2].rows, 0u);

  // State from another configuration is refused with the field named.
  auto other = o;
  other.seed = 18;
  marin::MixtureLoader wrong(c, other);
  EXPECT_ERROR(wrong.restore(json::parse(saved)), "seed");
  json broken = json::parse(saved);
  broken["sources"]["a"]["documents"] = 99;
  EXPECT_ERROR(resumed.restore(broken), "source 'a'", "documents");
  broken = json::parse(saved);
  broken["sources"].erase("b");
  EXPECT_ERROR(resumed.restore(broken), "sources");
  EXPECT_ERROR(resumed.restore(json{{"kind", "rows"}}), "mixture");
}

TEST(MixtureLoader, ShardProblemsSurfaceAtConstruction) {
  TempDir tmp("loader-bad");
  make_token_dir(tmp.path / "tok", 2, 10);
  const auto c = marin::MixtureConfig::from_json(json{{"weights", {{"a", 1}, {"b", 1}}}});
  auto o = options(tmp.path / "tok", 8, 1);
  o.tokenizer_hash = kHash ^ 1;
  EXPECT_ERROR(marin::MixtureLoader(c, o), "tokenizer hash");
  o = options(tmp.path / "tok", 8, 1);
  o.vocab_size = 1000;
  EXPECT_ERROR(marin::MixtureLoader(c, o), "a/train-00000.tok", "vocab size");
  o = options(tmp.path / "tok", 8, 1);
  fs::resize_file(tmp.path / "tok" / "b" / "train-00001.tok", 70);
  EXPECT_ERROR(marin::MixtureLoader(c, o), "b/train-00001.tok", "truncated");
  fs::remove(tmp.path / "tok" / "b" / "train-00001.tok");
  EXPECT_ERROR(marin::MixtureLoader(c, o), "b/train-00001.tok", "cannot open");
  EXPECT_ERROR(marin::MixtureLoader(c, options(tmp.path / "none", 8, 1)), "none", "manifest.json");
}

// ---- validation source --------------------------------------------------------------------------

TEST(ValidationSource, AllDocumentsInOrderThenPadding) {
  TempDir tmp("valid");
  make_token_dir(tmp.path / "tok", 2, 10);
  const int64_t S = 6;
  auto v = marin::ValidationSource::for_domain(tmp.str("tok"), "b", S);
  marin::TokenShard sh = marin::TokenShard::open(tmp.str("tok/b/valid-00000.tok"), kHash);
  std::vector<int32_t> want, got;
  for (uint64_t d = 0; d < sh.documents(); ++d)
    for (uint32_t t : sh.document(d)) want.push_back(int32_t(t));
  EXPECT_EQ(v->total_rows(), int64_t((want.size() + S - 1) / S));
  uint64_t scored = 0;
  while (!v->done()) {
    Batch b = take(*v, 2, S);
    for (size_t i = 0; i < b.tok.size(); ++i) {
      if (b.seg[i] < 0) {
        EXPECT_EQ(b.lab[i], -1);
        continue;
      }
      got.push_back(b.tok[i]);
      scored += b.lab[i] >= 0;
      if (b.tok[i] == int32_t(kEos)) {
        EXPECT_EQ(b.lab[i], -1);
      }
    }
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(scored, v->scored_tokens());
  EXPECT_EQ(v->documents(), 5u);
  EXPECT_EQ(v->text_bytes(), want.size() * 3);
  // Resume mid-pass.
  auto v2 = marin::ValidationSource::for_domain(tmp.str("tok"), "b", S);
  take(*v2, 3, S);
  const json st = v2->state();
  Batch x = take(*v2, 2, S);
  auto v3 = marin::ValidationSource::for_domain(tmp.str("tok"), "b", S);
  v3->restore(st);
  Batch y = take(*v3, 2, S);
  EXPECT_EQ(x.tok, y.tok);
  EXPECT_EQ(x.lab, y.lab);
  EXPECT_ERROR(marin::ValidationSource::for_domain(tmp.str("tok"), "q", S), "'q'", "valid");
}
