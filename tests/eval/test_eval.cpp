// Evaluation: sliding-window scoring, bits per byte and macro numbers, the contamination audit
// (planted-contamination acceptance test), decontamination, and bad input (tokenizer mismatch,
// empty domain, non-UTF-8 text). A synthetic corpus of random words is built once in a temp dir,
// tokenized with a small trained tokenizer and scored by a randomly initialised `tiny` model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "data/mixture.hpp"
#include "data/shards.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "eval/contamination.hpp"
#include "eval/domain_eval.hpp"
#include "model/model.hpp"
#include "train/checkpoint.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace marin;
using namespace marin::eval;
using marin::testing::error_of;
using marin::testing::run;
using marin::testing::TempDir;

namespace {

struct Doc {
  std::string id, text;
};

void write_jsonl(const std::string& path, const std::vector<Doc>& docs) {
  fs::create_directories(fs::path(path).parent_path());
  std::string s;
  for (const auto& d : docs) s += json({{"id", d.id}, {"text", d.text}}).dump() + "\n";
  write_file_atomic(path, s);
}

// Random text over a fixed vocabulary of made-up words: 13-gram collisions between independent
// documents are practically impossible (2000^13 combinations).
struct TextGen {
  std::mt19937_64 rng;
  std::vector<std::string> words;
  explicit TextGen(uint64_t seed) : rng(seed) {
    const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
    std::set<std::string> seen;
    while (seen.size() < 2000) {
      std::string w;
      const int len = 2 + int(rng() % 7);
      for (int i = 0; i < len; ++i) w += letters[rng() % (i == 0 ? 26 : 12)];
      seen.insert(w);
    }
    words.assign(seen.begin(), seen.end());
  }
  std::string paragraph(int n) {
    std::string p;
    for (int i = 0; i < n; ++i) {
      std::string w = words[rng() % words.size()];
      if (rng() % 9 == 0) w[0] = char(std::toupper(w[0]));
      if (i) p += (rng() % 13 == 0) ? "\n" : " ";
      p += w;
      if (rng() % 11 == 0) p += ",";
    }
    return p + ".";
  }
  std::string doc(int min_words, int max_words) {
    const int paras = 1 + int(rng() % 3);
    std::string d;
    for (int i = 0; i < paras; ++i) {
      if (i) d += "\n\n";
      d += paragraph(min_words + int(rng() % uint64_t(max_words - min_words + 1)));
    }
    return d;
  }
};

// The shared synthetic corpus: train+valid domains alpha and beta, an eval-only domain gamma.
// Planted: alpha/valid docs 1 and 4 and gamma doc 2 are copied verbatim into alpha's train split.
struct Fixture {
  TempDir dir{"eval"};
  std::string corpus, tokens, ckpt;
  std::set<std::string> planted;  // ids of the planted evaluation documents
  std::map<std::string, std::vector<Doc>> valid;
  ModelConfig cfg;
  uint64_t tok_hash = 0;

  Fixture() {
    corpus = dir.str("corpus");
    tokens = dir.str("tokens");
    ckpt = dir.str("ckpt");
    TextGen g(7);
    std::vector<Doc> alpha_train, beta_train;
    for (int i = 0; i < 40; ++i) alpha_train.push_back({fmt::format("a{}", i), g.doc(10, 40)});
    for (int i = 0; i < 30; ++i) beta_train.push_back({fmt::format("b{}", i), g.doc(10, 40)});
    for (int i = 0; i < 8; ++i) valid["alpha"].push_back({fmt::format("av{}", i), g.doc(14, 60)});
    for (int i = 0; i < 6; ++i) valid["beta"].push_back({fmt::format("bv{}", i), g.doc(14, 60)});
    for (int i = 0; i < 5; ++i) valid["gamma"].push_back({fmt::format("gv{}", i), g.doc(14, 60)});
    for (const Doc* d : {&valid["alpha"][1], &valid["alpha"][4], &valid["gamma"][2]}) {
      planted.insert(d->id);
      alpha_train.push_back({"copy-" + d->id, d->text});
    }
    write_jsonl(corpus + "/alpha/train-00000.jsonl", alpha_train);
    write_jsonl(corpus + "/beta/train-00000.jsonl", beta_train);
    for (auto& [dom, docs] : valid) write_jsonl(corpus + "/" + dom + "/valid-00000.jsonl", docs);

    std::vector<std::string> texts;
    for (const auto& d : alpha_train) texts.push_back(d.text);
    for (const auto& d : beta_train) texts.push_back(d.text);
    const Tokenizer tok = Tokenizer::train(texts, 512);
    tok_hash = tok.hash();
    TokenizeOptions to;
    to.corpus = corpus;
    to.out = tokens;
    to.threads = 1;
    to.progress = false;
    tokenize_corpus(tok, to);

    cfg = ModelConfig::preset("tiny");
    Model<float> m(cfg, 1);
    m.init(3);
    save_model(ckpt, cfg, m.table(), m.params().data());
    tok.save_json(ckpt + "/tokenizer.json");
  }
};

Fixture& fx() {
  static Fixture f;
  return f;
}

std::unique_ptr<Model<float>> load_model(int batch = 4) {
  auto m = std::make_unique<Model<float>>(fx().cfg, batch);
  load_params(fx().ckpt, m->table(), m->params().data());
  return m;
}

DocTokens load_docs(const std::string& domain) {
  const TokenManifest man = TokenManifest::load(fx().tokens);
  DocTokens docs;
  for (const auto& info : man.find(domain, "valid")) {
    const TokenShard sh = TokenShard::open(man.path(info), man.tokenizer_hash);
    for (uint64_t d = 0; d < sh.documents(); ++d) {
      std::vector<int32_t> t(sh.doc_size(d));
      sh.copy(sh.doc_begin(d), t.size(), t.data());
      docs.add(t.data(), t.size());
    }
  }
  return docs;
}

// Σ CE of the positions [score_begin, score_end) of one window, by a direct forward of that
// window alone in one row (padding after it, no segment ids).
double direct_window_ce(Model<float>& m, const int32_t* x, const Window& w) {
  const int64_t S = m.config().seq_len;
  std::vector<int32_t> tok(size_t(m.max_batch()) * S, 0), lab(tok.size(), -1);
  for (uint64_t j = 0; j < w.len; ++j) {
    const uint64_t p = w.begin + j;
    tok[j] = x[p];
    if (p >= w.score_begin && p < w.score_end) lab[j] = x[p + 1];
  }
  m.forward({1, tok.data(), lab.data(), nullptr});
  double ce = 0;
  for (int64_t i = 0; i < S; ++i) ce += m.token_ce()[i];
  return ce;
}

}  // namespace

TEST(Normalize, LowerCasePunctuationWhitespace) {
  EXPECT_EQ(
      normalize_words("Don't STOP, the  Café's\tnaïve\nEND.  ÉTÉ ΑΒΓ"),
      (std::vector<std::string>{"dont", "stop", "the", "cafés", "naïve", "end", "été", "αβγ"}));
  EXPECT_EQ(normalize_words(" ... -- !! "), std::vector<std::string>{});
  // Same words, different case/punctuation/spacing: same n-grams.
  std::vector<uint64_t> a, b;
  ngram_hashes("The quick brown fox jumps over the lazy dog", 3, a);
  ngram_hashes("the QUICK, brown\n\nfox -- jumps over; the lazy dog!", 3, b);
  EXPECT_EQ(a.size(), 7u);
  EXPECT_EQ(a, b);
  ngram_hashes("too short", 3, a);
  EXPECT_TRUE(a.empty());
}

TEST(Normalize, Paragraphs) {
  const auto p = split_paragraphs("one\ntwo\n\n  \nthree\n\n\nfour  five\n");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0], "one\ntwo");
  EXPECT_EQ(p[1], "three");
  EXPECT_EQ(p[2], "four  five");
  int words = 0;
  EXPECT_EQ(paragraph_hash("Four, FIVE!", &words), paragraph_hash("four five"));
  EXPECT_EQ(words, 2);
}

TEST(Bloom, NoFalseNegativesAndStatedRate) {
  const uint64_t n = 20000;
  NgramBloom b(n, 1e-3);
  EXPECT_EQ(b.k(), 10);
  std::mt19937_64 rng(1);
  std::vector<uint64_t> in(n);
  for (auto& x : in) b.add(x = rng());
  for (uint64_t x : in) ASSERT_TRUE(b.contains(x));
  uint64_t fp = 0;
  const uint64_t trials = 400000;
  for (uint64_t i = 0; i < trials; ++i) fp += b.contains(rng());
  const double observed = double(fp) / double(trials);
  EXPECT_NEAR(b.fp_rate(), 1e-3, 3e-4);  // the rate the filter states for itself
  EXPECT_LT(observed, 2 * b.fp_rate());
  // A cap on the size raises the stated rate instead of the memory.
  NgramBloom capped(n, 1e-6, 4096);
  EXPECT_TRUE(capped.capped());
  EXPECT_EQ(capped.bytes(), 4096u);
}

TEST(Windows, EveryPositionOnceWithContext) {
  for (int64_t S : {1, 7, 16, 64})
    for (int64_t stride : {int64_t(1), std::max<int64_t>(1, S / 3), S / 2 + 1, S})
      for (uint64_t n : {0, 1, 2, 5, 16, 17, 18, 40, 131}) {
        if (stride > S) continue;
        const auto w = plan_windows(n, S, stride);
        std::vector<int> hits(n, 0);
        for (size_t i = 0; i < w.size(); ++i) {
          ASSERT_LE(w[i].len, uint64_t(S));
          ASSERT_LE(w[i].begin + w[i].len, n);
          ASSERT_GE(w[i].score_begin, w[i].begin);
          ASSERT_LE(w[i].score_end, w[i].begin + w[i].len);
          for (uint64_t p = w[i].score_begin; p < w[i].score_end; ++p) {
            ++hits[p];
            if (i > 0) {
              ASSERT_GE(p - w[i].begin + 1, uint64_t(S - stride + 1));  // context
            }
          }
          if (i > 0) {
            ASSERT_EQ(w[i].len, uint64_t(S));  // later windows are full
          }
        }
        for (uint64_t p = 0; p + 1 < n; ++p) ASSERT_EQ(hits[p], 1) << n << " " << S << " " << p;
        if (n > 0) {
          ASSERT_EQ(hits[n - 1], 0);  // the last token predicts nothing
        }
      }
  EXPECT_THROW(plan_windows(10, 8, 9), Error);
  EXPECT_THROW(plan_windows(10, 8, 0), Error);
}

TEST(Scoring, SlidingEqualsWholeWhenTheDocumentFits) {
  auto m = load_model(4);
  const int64_t S = fx().cfg.seq_len;
  const DocTokens all = load_docs("alpha");
  // Short documents (cut to fit) scored alone, packed together, at several strides.
  uint64_t longest = 0;
  for (uint64_t d = 1; d < all.count(); ++d)
    if (all.size(d) > all.size(longest)) longest = d;
  ASSERT_GT(all.size(longest), uint64_t(2 * S));
  DocTokens docs;
  for (uint64_t d = 0; d < 6; ++d)
    docs.add(all.doc(d), std::min<uint64_t>(all.size(d), 10 + 9 * d));
  docs.add(all.doc(longest), uint64_t(S) + 1);  // exactly fits: S predictions in one window
  for (int64_t stride : {int64_t(1), S / 4, S}) {
    const auto packed = score_documents(*m, docs, stride);
    for (uint64_t d = 0; d < docs.count(); ++d) {
      const auto w = plan_windows(docs.size(d), S, stride);
      ASSERT_EQ(w.size(), 1u);
      const double whole = direct_window_ce(*m, docs.doc(d), w[0]);
      EXPECT_EQ(packed[d].predictions, docs.size(d) - 1);
      EXPECT_NEAR(packed[d].ce, whole, 1e-4 * std::max(1.0, whole)) << d << " " << stride;
    }
  }
  // A long document: the sum over its windows, each forwarded alone.
  DocTokens longdoc;
  longdoc.add(all.doc(longest), all.size(longest));
  const auto s = score_documents(*m, longdoc, 24);
  double manual = 0;
  for (const Window& w : plan_windows(longdoc.size(0), S, 24))
    manual += direct_window_ce(*m, longdoc.doc(0), w);
  EXPECT_EQ(s[0].predictions, longdoc.size(0) - 1);
  EXPECT_NEAR(s[0].ce, manual, 1e-4 * manual);
}

TEST(Report, BitsPerByteAndMacroByHand) {
  Subset s;
  s.add({100 * std::log(2.0), 50}, 51, 100);  // 100 bits over 100 bytes
  EXPECT_DOUBLE_EQ(s.bpb(), 1.0);
  EXPECT_DOUBLE_EQ(s.mean_ce(), 2 * std::log(2.0));
  s.add({0, 0}, 1, 0);  // an EOS-only document adds a document and a token, nothing else
  EXPECT_EQ(s.documents, 2u);
  EXPECT_EQ(s.tokens, 52u);
  EXPECT_DOUBLE_EQ(s.bpb(), 1.0);
  // Macro = unweighted mean of the domains' means, not a token-weighted mean.
  std::vector<DomainResult> d(3);
  d[0].all.add({10.0, 10}, 11, 20);         // mean 1, bpb 10/(20 ln2)
  d[1].all.add({3000.0, 1000}, 1001, 500);  // mean 3
  // d[2] empty: left out of the macro
  const Macro mac = macro_of(d, &DomainResult::all);
  EXPECT_EQ(mac.domains, 2);
  EXPECT_DOUBLE_EQ(*mac.loss, 2.0);
  EXPECT_NEAR(*mac.bpb, (10.0 / 20 + 3000.0 / 500) / std::log(2.0) / 2, 1e-12);
  EXPECT_FALSE(macro_of(d, &DomainResult::contaminated).loss.has_value());
  const json j = d[2].all.to_json();
  EXPECT_TRUE(j["mean_ce"].is_null());
  EXPECT_TRUE(j["bpb"].is_null());
}

// A per-domain token budget scores a fixed subset: documents in order, each only if it fits in
// what is left (the first always); the subset's scores are those of the same documents scored
// alone, and the audit counts only the subset.
TEST(Budget, GreedySubsetInOrderAndItsAudit) {
  const DocTokens docs = load_docs("alpha");
  const uint64_t budget = docs.size(0) + docs.size(2) + 1;  // the first, then what still fits
  std::vector<uint64_t> want;
  uint64_t left = budget;
  for (uint64_t d = 0; d < docs.count(); ++d)
    if (d == 0 || docs.size(d) <= left) want.push_back(d), left -= std::min(left, docs.size(d));
  ASSERT_LT(want.size(), docs.count());  // the budget really leaves documents out
  auto m = load_model();
  EvalOptions o;
  o.token_dir = fx().tokens;
  o.corpus = fx().corpus;
  o.domains = {"alpha"};
  o.max_tokens = budget;
  o.progress = false;
  const EvalReport r = evaluate_domains(*m, o);
  ASSERT_EQ(r.domains.size(), 1u);
  const DomainResult& a = r.domains[0];
  EXPECT_EQ(a.all.documents, want.size());
  DocTokens sub;
  uint64_t bytes = 0;
  for (uint64_t d : want) {
    sub.add(docs.doc(d), docs.size(d));
    bytes += fx().valid["alpha"][d].text.size();
  }
  const auto scores = score_documents(*m, sub, 0);
  double ce = 0;
  for (auto& s : scores) ce += s.ce;
  EXPECT_EQ(a.all.tokens, sub.tokens.size());
  EXPECT_LE(a.all.tokens, std::max<uint64_t>(budget, docs.size(0)));
  EXPECT_EQ(a.all.bytes, bytes);
  EXPECT_NEAR(a.all.ce, ce, 1e-6 * std::abs(ce));
  // Deterministic: the same subset and the same numbers again.
  const EvalReport again = evaluate_domains(*m, o);
  EXPECT_EQ(again.domains[0].all.ce, a.all.ce);
  // Without the text there are no per-document bytes for a subset: refused.
  o.corpus.clear();
  EXPECT_NE(error_of([&] { evaluate_domains(*m, o); }).find("needs the text corpus"),
            std::string::npos);
}

TEST(Audit, PlantedContaminationAcceptance) {
  Fixture& f = fx();
  IndexOptions io;
  io.progress = false;
  const NgramIndex index =
      build_ngram_index(TrainText::of_domains(f.corpus, {"alpha", "beta"}), io);
  EXPECT_EQ(index.n, 13);
  EXPECT_EQ(index.documents, 73u);
  EXPECT_LE(index.bloom.fp_rate(), 2e-6);

  // Document level: exactly the planted documents, each with overlap 1.
  std::set<std::string> found;
  double expected_fp = 0;
  for (const auto& [dom, docs] : f.valid)
    for (const auto& d : docs) {
      const Overlap o = document_overlap(index, d.text);
      ASSERT_GT(o.ngrams, 0u);
      expected_fp += -std::expm1(double(o.ngrams) * std::log1p(-index.bloom.fp_rate()));
      if (o.found > 0) found.insert(d.id);
      if (f.planted.count(d.id)) {
        EXPECT_EQ(o.found, o.ngrams);
      }
    }
  EXPECT_LT(expected_fp, 0.01);  // so any extra document would be beyond the stated rate
  EXPECT_EQ(found, f.planted);

  // The evaluation: per-domain counts and the clean-only macro, against a manual computation.
  auto m = load_model(4);
  EvalOptions o;
  o.token_dir = f.tokens;
  o.corpus = f.corpus;
  o.index = &index;
  o.tokenizer_hash = f.tok_hash;
  o.stride = 16;
  o.progress = false;
  const EvalReport r = evaluate_domains(*m, o);
  ASSERT_EQ(r.domains.size(), 3u);
  std::map<std::string, uint64_t> contaminated;
  for (const auto& d : r.domains) contaminated[d.domain] = d.contaminated.documents;
  EXPECT_EQ(contaminated,
            (std::map<std::string, uint64_t>{{"alpha", 2}, {"beta", 0}, {"gamma", 1}}));

  double clean_macro = 0, all_macro = 0, cont_macro = 0;
  int cont_domains = 0;
  for (const auto& d : r.domains) {
    const DocTokens docs = load_docs(d.domain);
    const auto scores = score_documents(*m, docs, 16);
    double ce = 0, cce = 0, xce = 0;
    uint64_t n = 0, cn = 0, xn = 0, ctok = 0;
    for (uint64_t i = 0; i < docs.count(); ++i) {
      ce += scores[i].ce, n += scores[i].predictions;
      if (f.planted.count(f.valid[d.domain][i].id)) {
        xce += scores[i].ce, xn += scores[i].predictions, ctok += docs.size(i);
      } else {
        cce += scores[i].ce, cn += scores[i].predictions;
      }
    }
    all_macro += ce / double(n);
    clean_macro += cce / double(cn);
    if (xn) cont_macro += xce / double(xn), ++cont_domains;
    EXPECT_EQ(d.contaminated.tokens, ctok);
    EXPECT_EQ(d.contaminated.predictions, xn);
    EXPECT_NEAR(d.clean.mean_ce(), cce / double(cn), 1e-9);
    if (d.domain == "beta") {
      EXPECT_TRUE(d.contaminated.to_json()["mean_ce"].is_null());
    }
  }
  EXPECT_NEAR(*r.macro.loss, all_macro / 3, 1e-9);
  EXPECT_NEAR(*r.macro_clean.loss, clean_macro / 3, 1e-9);
  EXPECT_NEAR(*r.macro_contaminated.loss, cont_macro / cont_domains, 1e-9);
  EXPECT_EQ(r.macro_contaminated.domains, 2);
  EXPECT_NE(*r.macro_clean.loss, *r.macro.loss);  // the planted documents are excluded

  // Bytes are per document from the text: BPB = Σ CE / (ln 2 · bytes of the text).
  for (const auto& d : r.domains) {
    uint64_t bytes = 0;
    for (const auto& doc : f.valid.at(d.domain)) bytes += doc.text.size();
    EXPECT_EQ(d.all.bytes, bytes);
    EXPECT_NEAR(d.all.bpb(), d.all.ce / (std::log(2.0) * double(bytes)), 1e-12);
  }
  // A higher threshold: the planted documents (overlap 1) stay contaminated.
  o.threshold = 0.99;
  EXPECT_EQ(evaluate_domains(*m, o).domains[0].contaminated.documents, 2u);
}

TEST(Audit, PartialOverlapAndThreshold) {
  TempDir t("eval-partial");
  TextGen g(11);
  const std::string ev = g.paragraph(60);  // 60 words: 48 13-grams
  const auto w = normalize_words(ev);
  std::string shared;
  for (int i = 0; i < 20; ++i) shared += w[i] + " ";  // 20 words: 8 of the 13-grams
  write_jsonl(t.str("c/tr/train-00000.jsonl"),
              {{"x", g.paragraph(30) + " " + shared + g.paragraph(5)}});
  IndexOptions io;
  io.progress = false;
  const NgramIndex index = build_ngram_index(TrainText::of_domains(t.str("c"), {"tr"}), io);
  const Overlap o = document_overlap(index, ev);
  EXPECT_EQ(o.ngrams, 48u);
  EXPECT_EQ(o.found, 8u);
  EXPECT_NEAR(o.fraction(), 8.0 / 48, 1e-12);
  EXPECT_THROW(build_ngram_index(TrainText::of_domains(t.str("c"), {"nope"}), io), Error);
}

TEST(Audit, CliReportsPlantedDocuments) {
  Fixture& f = fx();
  TempDir t("eval-cli");
  const auto r = run(fmt::format(
      "eval --checkpoint {} --token-dir {} --corpus {} --train-domains alpha,beta --stride 32 "
      "--batch 4 --quiet --json {}",
      f.ckpt, f.tokens, f.corpus, t.str("r.json")));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("clean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("macro (3 domains)"), std::string::npos) << r.out;
  const json j = json::parse(read_file(t.str("r.json")));
  EXPECT_EQ(j["domains"]["alpha"]["contaminated"]["documents"], 2);
  EXPECT_EQ(j["domains"]["gamma"]["contaminated"]["documents"], 1);
  // Which documents, not only how many: every audited document with its overlap and flag.
  std::set<std::string> flagged;
  for (const auto& [dom, d] : j["domains"].items()) {
    EXPECT_EQ(d["audited_documents"].size(), f.valid.at(dom).size()) << dom;
    for (const auto& doc : d["audited_documents"])
      if (doc["contaminated"].get<bool>()) {
        flagged.insert(doc["id"].get<std::string>());
        EXPECT_DOUBLE_EQ(doc["overlap"].get<double>(), 1.0);
      }
  }
  EXPECT_EQ(flagged, f.planted);
  EXPECT_TRUE(j["domains"]["beta"]["contaminated"]["mean_ce"].is_null());
  EXPECT_EQ(j["macro_contaminated"]["domains"], 2);
  EXPECT_EQ(j["audit"]["n"], 13);
  EXPECT_TRUE(j["tokenizer_checked"].get<bool>());
  // Without training data: no audit, a note says so.
  const auto r2 = run(
      fmt::format("eval --checkpoint {} --token-dir {} --domains beta --quiet", f.ckpt, f.tokens));
  ASSERT_EQ(r2.code, 0) << r2.out;
  EXPECT_NE(r2.out.find("contamination audit: off"), std::string::npos) << r2.out;
  // The training data from a mixture file.
  write_file_atomic(t.str("mix.toml"), "weights = { alpha = 1, beta = 0 }\n");
  const auto r3 = run(
      fmt::format("eval --checkpoint {} --token-dir {} --corpus {} --mixture {} --quiet --json {}",
                  f.ckpt, f.tokens, f.corpus, t.str("mix.toml"), t.str("r3.json")));
  ASSERT_EQ(r3.code, 0) << r3.out;
  const json j3 = json::parse(read_file(t.str("r3.json")));
  EXPECT_EQ(j3["audit"]["train_sources"], json::array({"alpha:train"}));  // beta has weight 0
  EXPECT_EQ(j3["domains"]["alpha"]["contaminated"]["documents"], 2);
}

TEST(BadInput, TokenizerMismatch) {
  Fixture& f = fx();
  auto m = load_model(2);
  EvalOptions o;
  o.token_dir = f.tokens;
  o.tokenizer_hash = f.tok_hash ^ 1;
  o.progress = false;
  try {
    evaluate_domains(*m, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tokenizer mismatch"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fmt::format("{:016x}", f.tok_hash)), std::string::npos) << msg;
    EXPECT_NE(msg.find(fmt::format("{:016x}", f.tok_hash ^ 1)), std::string::npos) << msg;
  }
  // The CLI: a checkpoint carrying another tokenizer.
  TempDir t("eval-tok");
  fs::copy(f.ckpt, t.str("ck"));
  Tokenizer::train({"some other text entirely", "to make a different vocabulary"}, 300)
      .save_json(t.str("ck/tokenizer.json"));
  const auto r = run(fmt::format("eval --checkpoint {} --token-dir {}", t.str("ck"), f.tokens));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("tokenizer mismatch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("{:016x}", f.tok_hash)), std::string::npos) << r.out;
}

TEST(BadInput, EmptyDomain) {
  Fixture& f = fx();
  TempDir t("eval-empty");
  fs::create_directories(t.str("c/empty"));
  fs::copy(f.corpus + "/beta", t.str("c/beta"), fs::copy_options::recursive);
  write_file_atomic(t.str("c/empty/valid-00000.jsonl"), "");  // a domain with no documents
  TokenizeOptions to;
  to.corpus = t.str("c");
  to.out = t.str("tok");
  to.threads = 1;
  to.progress = false;
  tokenize_corpus(Tokenizer::from_json(f.ckpt + "/tokenizer.json"), to);
  auto m = load_model(2);
  EvalOptions o;
  o.token_dir = t.str("tok");
  o.progress = false;
  try {
    evaluate_domains(*m, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("domain 'empty' has no documents to score"),
              std::string::npos)
        << e.what();
  }
  o.skip_empty = true;
  const EvalReport r = evaluate_domains(*m, o);
  EXPECT_EQ(r.skipped, std::vector<std::string>{"empty"});
  ASSERT_EQ(r.domains.size(), 1u);
  EXPECT_EQ(r.domains[0].domain, "beta");
  EXPECT_EQ(r.macro.domains, 1);
  // An unknown domain names the available ones.
  o.domains = {"nope"};
  try {
    evaluate_domains(*m, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("available: beta, empty"), std::string::npos) << e.what();
  }
  // The CLI.
  const auto r2 =
      run(fmt::format("eval --checkpoint {} --token-dir {} --quiet", f.ckpt, t.str("tok")));
  EXPECT_EQ(r2.code, 1) << r2.out;
  const auto r3 =
      run(fmt::format("eval --checkpoint {} --token-dir {} --skip-empty", f.ckpt, t.str("tok")));
  EXPECT_EQ(r3.code, 0) << r3.out;
  EXPECT_NE(r3.out.find("warning: domain 'empty'"), std::string::npos) << r3.out;
}

TEST(BadInput, NonUtf8TextAndMismatchedCorpus) {
  Fixture& f = fx();
  TempDir t("eval-utf8");
  // A text shard with a byte that is not UTF-8: an error naming file:line, for the audit index
  // and for the evaluation text alike.
  const std::string bad = t.str("c/tr/train-00000.jsonl");
  fs::create_directories(fs::path(bad).parent_path());
  write_file_atomic(bad,
                    "{\"id\":\"ok\",\"text\":\"fine\"}\n\n{\"id\":\"x\",\"text\":\"caf\xe9\"}\n");
  IndexOptions io;
  io.progress = false;
  try {
    build_ngram_index(TrainText::of_domains(t.str("c"), {"tr"}), io);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(bad + ":3: not valid UTF-8 (byte 0xe9 at column"), std::string::npos) << msg;
  }
  // An evaluation corpus that is not the one the shards were made from.
  fs::copy(f.corpus, t.str("c2"), fs::copy_options::recursive);
  auto docs = f.valid.at("beta");
  docs.pop_back();
  write_jsonl(t.str("c2/beta/valid-00000.jsonl"), docs);
  auto m = load_model(2);
  EvalOptions o;
  o.token_dir = f.tokens;
  o.corpus = t.str("c2");
  o.domains = {"beta"};
  o.progress = false;
  try {
    evaluate_domains(*m, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("was not made from this corpus"), std::string::npos)
        << e.what();
  }
}

TEST(Decontaminate, RemovesExactlyTheOverlappingTrainingDocuments) {
  TempDir t("decon");
  TextGen g(5);
  const std::string c = t.str("c");
  const std::string p1 = g.paragraph(20), p2 = g.paragraph(25), shortp = g.paragraph(6);
  write_jsonl(c + "/ev/valid-00000.jsonl",
              {{"e1", g.paragraph(30) + "\n\n" + p1}, {"e2", p2 + "\n\n" + shortp}});
  // p1 with other case, punctuation and line breaks still matches after normalisation.
  std::string p1_variant;
  for (const auto& w : normalize_words(p1)) p1_variant += w + (p1_variant.size() % 3 ? "\n" : ", ");
  std::vector<Doc> train = {
      {"keep1", g.doc(10, 30)},
      {"drop1", g.paragraph(15) + "\n\n" + p1_variant + "\n\n" + g.paragraph(9)},
      {"keep-short", g.paragraph(12) + "\n\n" + shortp},  // shares only a 6-word paragraph
      {"keep-part", g.paragraph(12) + " " + p2},          // p2 inside a longer paragraph
      {"drop2", p2},
      {"keep2", g.doc(10, 30)}};
  write_jsonl(c + "/tr/train-00000.jsonl", train);
  write_jsonl(c + "/tr/valid-00000.jsonl", {{"tv", g.paragraph(20)}});
  fs::create_directories(c + "/LICENSES");
  write_file_atomic(c + "/LICENSES/x.txt", "licence\n");
  json man = {{"format", "marin-corpus/1"},
              {"domains",
               {{"tr",
                 {{"documents", {{"train", 6}, {"valid", 1}}},
                  {"bytes", {{"train", 1}, {"valid", 1}}},
                  {"shards",
                   {{{"file", "tr/train-00000.jsonl"}, {"split", "train"}, {"documents", 6}}}}}}}},
              {"totals", {{"documents", {{"train", 6}, {"valid", 3}, {"all", 9}}}}}};
  write_file_atomic(c + "/manifest.json", man.dump());

  const auto r =
      run(fmt::format("decontaminate --corpus {} --out {} --eval-domains ev", c, t.str("out")));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("tr"), std::string::npos);
  std::vector<std::string> kept;
  for_each_jsonl_document(t.str("out/tr/train-00000.jsonl"),
                          [&](const text_corpus::Document& d) { kept.push_back(d.id("")); });
  EXPECT_EQ(kept, (std::vector<std::string>{"keep1", "keep-short", "keep-part", "keep2"}));
  // Surviving lines are byte-identical; other files are copied.
  const std::string in = read_file(c + "/tr/train-00000.jsonl");
  for_each_jsonl_document(t.str("out/tr/train-00000.jsonl"), [&](const text_corpus::Document& d) {
    EXPECT_NE(in.find(std::string(d.raw) + "\n"), std::string::npos);
  });
  EXPECT_EQ(read_file(t.str("out/tr/valid-00000.jsonl")), read_file(c + "/tr/valid-00000.jsonl"));
  EXPECT_EQ(read_file(t.str("out/LICENSES/x.txt")), "licence\n");
  const json out = json::parse(read_file(t.str("out/manifest.json")));
  EXPECT_EQ(out["domains"]["tr"]["documents"]["train"], 4);
  EXPECT_EQ(out["domains"]["tr"]["shards"][0]["documents"], 4);
  EXPECT_EQ(out["totals"]["documents"]["train"], 4);
  EXPECT_EQ(out["totals"]["documents"]["all"], 7);
  EXPECT_EQ(out["decontamination"]["result"]["domains"]["tr"]["removed"], 2);
  // The output must be new.
  const auto again = run(fmt::format("decontaminate --corpus {} --out {}", c, t.str("out")));
  EXPECT_EQ(again.code, 1) << again.out;
}

TEST(Audit, TrainingDataFromTheRunDirectory) {
  Fixture& f = fx();
  TempDir t("eval-run");
  const std::string ck = t.str("run/checkpoints/step-00000010");
  fs::create_directories(ck);
  fs::copy(f.ckpt, ck, fs::copy_options::recursive);
  const json run_json = {{"options",
                          {{"data",
                            {{"kind", "mixture"},
                             {"tokens", f.tokens},
                             {"mixture", MixtureConfig::uniform({"alpha"}).to_json()}}}}}};
  write_file_atomic(t.str("run/run.json"), run_json.dump());
  // No --token-dir, --corpus or training data: all found from run.json and the token manifest.
  const auto r = run(fmt::format("eval --checkpoint {} --quiet --json {}", ck, t.str("r.json")));
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = json::parse(read_file(t.str("r.json")));
  EXPECT_EQ(j["tokens"], f.tokens);
  EXPECT_EQ(j["corpus"], f.corpus);
  EXPECT_EQ(j["audit"]["train_sources"], json::array({"alpha:train"}));
  EXPECT_EQ(j["domains"]["alpha"]["contaminated"]["documents"], 2);
  EXPECT_EQ(j["domains"]["gamma"]["contaminated"]["documents"], 1);
}
