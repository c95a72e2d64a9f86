#pragma once
// Contamination audit and decontamination (docs/evaluation.md).
//
//  * Normalisation: text → words. Letters are lower-cased (ASCII, Latin-1, Greek, Cyrillic),
//    punctuation and symbols are deleted (so "don't" → "dont"), and the rest is split on
//    whitespace. Each word is hashed with xxh64; an n-gram's hash is the xxh64 of its n word
//    hashes (seed n).
//  * NgramBloom: a Bloom filter of the training text's n-gram hashes, sized from the exact n-gram
//    count and a target false-positive rate (optionally capped in bytes); it reports the
//    false-positive rate it actually reaches (fill^k).
//  * An evaluation document's overlap is the fraction of its n-grams found in the filter; it is
//    contaminated when the overlap is above the threshold (default 0: any shared n-gram, the GPT-3
//    rule). A document with fewer than n words has no n-gram: it is counted as unchecked (clean).
//  * decontaminate(): Paloma's rule, removing every training document that contains a paragraph
//    (split on blank lines, normalised, at least min_words words) that also occurs in an
//    evaluation document.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "data/text_corpus.hpp"

namespace marin::corpus {
class ShardChecksums;  // data/corpus/corpus.hpp
}

namespace marin::eval {

// Normalised words of a text (for tests and documentation; the audit uses word_hashes).
std::vector<std::string> normalize_words(std::string_view text);
// xxh64 (seed 0) of each normalised word, appended to `out` (cleared first).
void word_hashes(std::string_view text, std::vector<uint64_t>& out);
// One hash per n-gram of consecutive normalised words (none when the text has fewer than n).
void ngram_hashes(std::string_view text, int n, std::vector<uint64_t>& out);
// Hash of a normalised paragraph (its words joined by one space).
uint64_t paragraph_hash(std::string_view paragraph, int* words = nullptr);
// Paragraphs of a text: split on blank lines (lines that are empty or whitespace only).
std::vector<std::string_view> split_paragraphs(std::string_view text);

// A JSONL text shard of the corpus, read line by line: fn(document) for every line that is not
// blank (the rule of `marin tokenize`, so document d of the text shard is document d
// of its token shard). marin::Error naming file:line for a line that is not JSON, not an object
// with a string "text", or not valid UTF-8 (nlohmann::json rejects ill-formed UTF-8). With
// `sums`, the file is first checked against its corpus manifest's xxh64.
void for_each_jsonl_document(const std::string& file,
                             const std::function<void(const text_corpus::Document&)>& fn,
                             const corpus::ShardChecksums* sums = nullptr);
// ROOT/<domain>/<split>-NNNNN.jsonl, sorted; empty when there are none.
std::vector<std::string> corpus_shards(const std::string& root, const std::string& domain,
                                       const std::string& split);
// The domains of ROOT that have at least one <split> shard, sorted. marin::Error when ROOT is not
// a directory.
std::vector<std::string> corpus_domains(const std::string& root, const std::string& split);

class NgramBloom {
 public:
  NgramBloom() = default;
  // Sized for `expected` insertions at false-positive rate `target_fp`: m = −n ln p / (ln 2)²
  // bits (rounded up to 64), k = round(m/n · ln 2) hash functions (1..32). When max_bytes > 0
  // and the filter would be larger, it is capped at max_bytes (the reached rate is then higher;
  // see fp_rate()).
  NgramBloom(uint64_t expected, double target_fp, uint64_t max_bytes = 0);

  void add(uint64_t h);  // thread-safe (atomic OR)
  bool contains(uint64_t h) const;

  uint64_t bits() const { return m_; }
  int k() const { return k_; }
  uint64_t bytes() const { return words_.size() * 8; }
  uint64_t inserted() const { return inserted_; }
  void set_inserted(uint64_t n) { inserted_ = n; }
  double target_fp() const { return target_; }
  bool capped() const { return capped_; }
  // Fraction of bits set, and the false-positive rate of one query for an absent n-gram:
  // fill^k (exact for the realised filter, up to the independence of the k probes).
  double fill() const;
  double fp_rate() const;

 private:
  uint64_t m_ = 0;
  int k_ = 0;
  double target_ = 0;
  bool capped_ = false;
  uint64_t inserted_ = 0;
  std::vector<uint64_t> words_;
};

// What the index is built from: JSONL shards of the training text.
struct TrainSource {
  std::string domain;
  std::string split = "train";
};
struct TrainText {
  std::string corpus;                // ROOT with <domain>/<split>-NNNNN.jsonl
  std::vector<TrainSource> sources;  // what the run trained on
  static TrainText of_domains(const std::string& corpus, const std::vector<std::string>& domains);
};

struct IndexOptions {
  int n = 13;
  double target_fp = 1e-6;  // per n-gram query
  uint64_t max_bytes = 2ull << 30;
  int threads = 2;
  bool progress = true;
};

struct NgramIndex {
  int n = 13;
  TrainText source;
  uint64_t documents = 0, ngrams = 0, text_bytes = 0;  // of the training text
  NgramBloom bloom;
  nlohmann::json to_json() const;  // n, sources, counts, bits, k, fill, fp rates
};

// Two passes over the training shards: count the n-grams (sizes the filter), then insert them.
// marin::Error for a training domain without <split> shards (naming the directory) or bad lines.
NgramIndex build_ngram_index(const TrainText& text, const IndexOptions& opts);

struct Overlap {
  uint64_t ngrams = 0;  // n-grams of the document
  uint64_t found = 0;   // of them in the training index
  double fraction() const { return ngrams ? double(found) / double(ngrams) : 0.0; }
};
Overlap document_overlap(const NgramIndex& index, std::string_view text);
// The audit's decision (docs/evaluation.md): some n-gram was found and the overlap fraction is
// above the threshold. A text with fewer than n words (no n-gram) is never contaminated.
inline bool is_contaminated(const Overlap& o, double threshold) {
  return o.ngrams > 0 && o.found > 0 && o.fraction() > threshold;
}

// --- Decontamination (Paloma's paragraph rule) ---
struct DecontaminateOptions {
  std::string corpus;                     // input ROOT (train shards read from here)
  std::string eval_corpus;                // "" = corpus: where the evaluation documents are
  std::vector<std::string> eval_domains;  // "" = every domain with <eval_split> shards
  std::string eval_split = "valid";
  std::vector<std::string> train_domains;  // "" = every domain with train shards
  std::string out;                         // output ROOT (must not exist or be empty)
  int min_words = 13;                      // paragraphs shorter than this are ignored
  bool verify = true;  // check every shard against its manifest's xxh64 (--no-verify: skip)
  bool progress = true;
};

struct DecontaminateDomain {
  std::string domain;
  uint64_t documents = 0, removed = 0;  // train documents before / removed
  uint64_t bytes = 0, removed_bytes = 0;
};

struct DecontaminateResult {
  uint64_t eval_documents = 0, eval_paragraphs = 0;  // distinct eval paragraphs ≥ min_words
  std::vector<DecontaminateDomain> domains;
  nlohmann::json to_json() const;
};

// Writes a copy of the corpus to opts.out with the training documents that share a paragraph with
// an evaluation document removed (every other file copied as is; surviving lines byte-identical;
// manifest.json updated: per-shard and per-domain counts, sizes and hashes, totals, and a
// "decontamination" record).
DecontaminateResult decontaminate(const DecontaminateOptions& opts);

}  // namespace marin::eval
