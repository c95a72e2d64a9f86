// Contamination audit (n-gram Bloom filter) and Paloma-style decontamination. See
// contamination.hpp and docs/evaluation.md.
#include "eval/contamination.hpp"

#include <fmt/core.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <unordered_set>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
#include "core/limits.hpp"
#include "core/progress.hpp"
#include "core/utf8.hpp"
#include "data/corpus/corpus.hpp"
#include "data/text_corpus.hpp"

namespace marin::eval {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Decodes one UTF-8 code point at s[i]; returns its length (1 for an invalid byte, whose value is
// returned as 0x110000 + byte so that it is kept as a word character and never matches a letter).
size_t decode(std::string_view s, size_t i, uint32_t& cp) {
  if (const size_t n = utf8::decode(s, i, cp)) return n;
  cp = 0x110000 + static_cast<unsigned char>(s[i]);
  return 1;
}

void encode(uint32_t cp, std::string& out) {
  if (cp >= 0x110000)
    out.push_back(static_cast<char>(cp - 0x110000));
  else
    utf8::append(out, cp);
}

enum class Kind { Space, Drop, Word };

Kind classify(uint32_t cp) {
  if (cp < 0x80) {
    if (cp <= 0x20 || cp == 0x7F) return Kind::Space;  // controls count as separators
    const char c = static_cast<char>(cp);
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      return Kind::Word;
    return Kind::Drop;  // ASCII punctuation and symbols
  }
  if (cp >= 0x110000) return Kind::Word;  // an invalid byte
  if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
      cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
    return Kind::Space;
  if (cp < 0xA0) return Kind::Space;                                              // C1 controls
  if ((cp >= 0xA1 && cp <= 0xBF) || cp == 0xD7 || cp == 0xF7) return Kind::Drop;  // Latin-1 punct.
  if ((cp >= 0x200B && cp <= 0x206F) || (cp >= 0x20A0 && cp <= 0x20CF) ||         // general punct.,
      (cp >= 0x2190 && cp <= 0x2BFF) || (cp >= 0x3001 && cp <= 0x303F) ||  // currency, arrows,
      (cp >= 0xFE00 && cp <= 0xFE0F) || cp == 0xFEFF || (cp >= 0xFF01 && cp <= 0xFF0F))  // math
    return Kind::Drop;
  return Kind::Word;
}

uint32_t lower(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp < 0xC0) return cp;
  if (cp <= 0xDE && cp != 0xD7) return cp + 0x20;
  if (cp >= 0x100 && cp <= 0x137 && cp % 2 == 0) return cp + 1;
  if (cp >= 0x139 && cp <= 0x148 && cp % 2 == 1) return cp + 1;
  if (cp >= 0x14A && cp <= 0x177 && cp % 2 == 0) return cp + 1;
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 0x20;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 0x20;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
  return cp;
}

// Calls fn(word) for each normalised word.
template <class F>
void for_each_word(std::string_view text, F&& fn) {
  std::string word;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    i += decode(text, i, cp);
    switch (classify(cp)) {
      case Kind::Space:
        if (!word.empty()) fn(std::string_view(word)), word.clear();
        break;
      case Kind::Drop:
        break;
      case Kind::Word:
        encode(lower(cp), word);
        break;
    }
  }
  if (!word.empty()) fn(std::string_view(word));
}

// Runs fn(i) for i in [0, n) on `threads` threads; the first exception is rethrown.
template <class F>
void parallel_for(int64_t n, int threads, F&& fn) {
  std::exception_ptr error;
  std::mutex mu;
#pragma omp parallel for schedule(dynamic, 16) num_threads(std::max(1, threads))
  for (int64_t i = 0; i < n; ++i) {
    try {
      fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

uint64_t mix64(uint64_t x) {  // SplitMix64 finaliser: the second Bloom hash
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__extension__ typedef unsigned __int128 u128;
inline uint64_t reduce(uint64_t x, uint64_t m) {
  return uint64_t((u128(x) * u128(m)) >> 64);
}

}  // namespace

std::vector<std::string> normalize_words(std::string_view text) {
  std::vector<std::string> out;
  for_each_word(text, [&](std::string_view w) { out.emplace_back(w); });
  return out;
}

void word_hashes(std::string_view text, std::vector<uint64_t>& out) {
  out.clear();
  for_each_word(text, [&](std::string_view w) { out.push_back(XXH64(w.data(), w.size(), 0)); });
}

void ngram_hashes(std::string_view text, int n, std::vector<uint64_t>& out) {
  std::vector<uint64_t> w;
  word_hashes(text, w);
  out.clear();
  if (n <= 0 || w.size() < size_t(n)) return;
  out.reserve(w.size() - n + 1);
  for (size_t i = 0; i + n <= w.size(); ++i)
    out.push_back(XXH64(w.data() + i, sizeof(uint64_t) * size_t(n), uint64_t(n)));
}

uint64_t paragraph_hash(std::string_view paragraph, int* words) {
  std::string joined;
  int count = 0;
  for_each_word(paragraph, [&](std::string_view w) {
    if (count++) joined.push_back(' ');
    joined.append(w);
  });
  if (words) *words = count;
  return XXH64(joined.data(), joined.size(), 0x9a7a);
}

std::vector<std::string_view> split_paragraphs(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = std::string_view::npos, end = 0;  // current paragraph [start, end)
  for (size_t at = 0; at <= text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(at, nl - at);
    if (text_corpus::blank(line)) {
      if (start != std::string_view::npos) out.push_back(text.substr(start, end - start));
      start = std::string_view::npos;
    } else {
      if (start == std::string_view::npos) start = at;
      end = nl;
    }
    at = nl + 1;
  }
  if (start != std::string_view::npos) out.push_back(text.substr(start, end - start));
  return out;
}

void for_each_jsonl_document(const std::string& file,
                             const std::function<void(const text_corpus::Document&)>& fn,
                             const corpus::ShardChecksums* sums) {
  const std::string data = read_file(file);
  if (sums) sums->check(file, data);
  text_corpus::for_each_document(data, file, fn);
}

std::vector<std::string> corpus_shards(const std::string& root, const std::string& domain,
                                       const std::string& split) {
  std::vector<std::string> out;
  const fs::path dir = fs::path(root) / domain;
  if (!fs::is_directory(dir)) return out;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.is_regular_file() && text_corpus::shard_split(f.path().filename().string()) == split)
      out.push_back(f.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// --- Bloom filter ---

NgramBloom::NgramBloom(uint64_t expected, double target_fp, uint64_t max_bytes)
    : target_(target_fp) {
  MARIN_CHECK(target_fp > 0 && target_fp < 1, "Bloom filter: false-positive rate {} not in (0, 1)",
              target_fp);
  const double n = double(std::max<uint64_t>(expected, 1));
  const double ln2 = std::log(2.0);
  double m = std::ceil(-n * std::log(target_fp) / (ln2 * ln2));
  if (max_bytes > 0 && m > double(max_bytes) * 8) m = double(max_bytes) * 8, capped_ = true;
  if (!(m < 0x1p62)) fail("Bloom filter: {} bits for {} n-grams is too large", m, expected);
  m_ = std::max<uint64_t>(64, (uint64_t(m) + 63) / 64 * 64);
  k_ = int(std::clamp(std::lround(double(m_) / n * ln2), 1l, 32l));
  require_memory(int64_t(m_ / 8),
                 fmt::format("the Bloom filter of {} n-grams (--bloom-mb caps it)", expected));
  words_.assign(m_ / 64, 0);
}

void NgramBloom::add(uint64_t h) {
  const uint64_t h2 = mix64(h) | 1;
  for (int i = 0; i < k_; ++i) {
    const uint64_t bit = reduce(h + uint64_t(i) * h2, m_);
    std::atomic_ref<uint64_t>(words_[bit >> 6])
        .fetch_or(uint64_t(1) << (bit & 63), std::memory_order_relaxed);
  }
}

bool NgramBloom::contains(uint64_t h) const {
  if (m_ == 0) return false;
  const uint64_t h2 = mix64(h) | 1;
  for (int i = 0; i < k_; ++i) {
    const uint64_t bit = reduce(h + uint64_t(i) * h2, m_);
    if (!(words_[bit >> 6] >> (bit & 63) & 1)) return false;
  }
  return true;
}

double NgramBloom::fill() const {
  if (m_ == 0) return 0;
  uint64_t set = 0;
  for (uint64_t w : words_) set += uint64_t(__builtin_popcountll(w));
  return double(set) / double(m_);
}

double NgramBloom::fp_rate() const {
  return m_ ? std::pow(fill(), k_) : 0.0;
}

// --- index ---

TrainText TrainText::of_domains(const std::string& corpus,
                                const std::vector<std::string>& domains) {
  TrainText t;
  t.corpus = corpus;
  for (const auto& d : domains) t.sources.push_back({d, "train"});
  return t;
}

json NgramIndex::to_json() const {
  const double fill = bloom.fill();
  json sources = json::array();
  for (const auto& s : source.sources) sources.push_back(s.domain + ":" + s.split);
  return {{"n", n},
          {"train_corpus", source.corpus},
          {"train_sources", sources},
          {"train_documents", documents},
          {"train_ngrams", ngrams},
          {"train_text_bytes", text_bytes},
          {"bloom_bits", bloom.bits()},
          {"bloom_bytes", bloom.bytes()},
          {"bloom_hashes", bloom.k()},
          {"bloom_fill", fill},
          {"bloom_capped", bloom.capped()},
          {"target_fp_rate", bloom.target_fp()},
          {"fp_rate", std::pow(fill, bloom.k())}};
}

NgramIndex build_ngram_index(const TrainText& text, const IndexOptions& opts) {
  MARIN_CHECK(opts.n >= 1, "n-gram index: n must be ≥ 1, got {}", opts.n);
  MARIN_CHECK(!text.sources.empty(), "n-gram index: no training domains given");
  NgramIndex index;
  index.n = opts.n;
  index.source = text;
  std::vector<std::string> files;
  uint64_t total = 0;
  for (const TrainSource& src : text.sources) {
    const auto f = corpus_shards(text.corpus, src.domain, src.split);
    if (f.empty())
      fail("training corpus {}: domain '{}' has no {}-NNNNN.jsonl shards in {}", text.corpus,
           src.domain, src.split, (fs::path(text.corpus) / src.domain).string());
    files.insert(files.end(), f.begin(), f.end());
  }
  std::sort(files.begin(), files.end());  // a domain named by two sources is read once
  files.erase(std::unique(files.begin(), files.end()), files.end());
  for (const auto& p : files) total += fs::file_size(p);
  Progress progress(opts.progress ? 2 * total : 0, "n-gram index", "B");
  // Pass 0 counts, pass 1 inserts.
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) index.bloom = NgramBloom(index.ngrams, opts.target_fp, opts.max_bytes);
    for (const std::string& file : files) {
      const std::string data = read_file(file);
      const auto lines = split_lines(data);
      std::atomic<uint64_t> docs{0}, grams{0}, bytes{0};
      parallel_for(int64_t(lines.size()), opts.threads, [&](int64_t i) {
        if (text_corpus::blank(lines[i])) return;
        json j;
        const std::string& t = text_corpus::document_text(lines[i], file, uint64_t(i) + 1, j);
        std::vector<uint64_t> h;
        ngram_hashes(t, opts.n, h);
        if (pass == 0) {
          docs += 1, grams += h.size(), bytes += t.size();
        } else {
          for (uint64_t x : h) index.bloom.add(x);
        }
      });
      if (pass == 0) index.documents += docs, index.ngrams += grams, index.text_bytes += bytes;
      if (opts.progress) progress.add(data.size());
    }
  }
  progress.finish();
  index.bloom.set_inserted(index.ngrams);
  return index;
}

Overlap document_overlap(const NgramIndex& index, std::string_view text) {
  std::vector<uint64_t> h;
  ngram_hashes(text, index.n, h);
  Overlap o;
  o.ngrams = h.size();
  for (uint64_t x : h) o.found += index.bloom.contains(x);
  return o;
}

// --- decontamination ---

json DecontaminateResult::to_json() const {
  json d = json::object();
  for (const auto& x : domains)
    d[x.domain] = {{"documents", x.documents},
                   {"removed", x.removed},
                   {"bytes", x.bytes},
                   {"removed_bytes", x.removed_bytes}};
  return {{"eval_documents", eval_documents}, {"eval_paragraphs", eval_paragraphs}, {"domains", d}};
}

std::vector<std::string> corpus_domains(const std::string& root, const std::string& split) {
  std::vector<std::string> out;
  if (!fs::is_directory(root)) fail("corpus {}: not a directory", root);
  for (const auto& d : fs::directory_iterator(root))
    if (d.is_directory() && !corpus_shards(root, d.path().filename().string(), split).empty())
      out.push_back(d.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// The options checked before anything is read: the output is new (or empty) and not the input.
void check_paths(const DecontaminateOptions& o) {
  MARIN_CHECK(!o.corpus.empty() && !o.out.empty(),
              "decontaminate: --corpus and --out are required");
  MARIN_CHECK(o.min_words >= 1, "decontaminate: --min-words must be ≥ 1, got {}", o.min_words);
  if (!fs::is_directory(o.corpus)) fail("decontaminate: corpus {} is not a directory", o.corpus);
  if (fs::exists(o.out) && !(fs::is_directory(o.out) && fs::is_empty(o.out)))
    fail("decontaminate: output {} already exists and is not an empty directory", o.out);
  if (fs::exists(o.out) && fs::equivalent(o.out, o.corpus))
    fail("decontaminate: output {} is the input corpus", o.out);
}

// The hashes of every evaluation paragraph of at least min_words words; counts the evaluation
// documents and distinct paragraphs into `r`.
std::unordered_set<uint64_t> eval_paragraph_hashes(const DecontaminateOptions& o,
                                                   const std::string& eval_root,
                                                   const std::vector<std::string>& eval_domains,
                                                   DecontaminateResult& r) {
  const corpus::ShardChecksums eval_sums(eval_root, o.verify);
  std::unordered_set<uint64_t> paragraphs;
  for (const auto& d : eval_domains) {
    const auto files = corpus_shards(eval_root, d, o.eval_split);
    if (files.empty())
      fail("decontaminate: evaluation domain '{}' has no {} shards in {}", d, o.eval_split,
           eval_root);
    for (const auto& f : files)
      for_each_jsonl_document(
          f,
          [&](const text_corpus::Document& doc) {
            ++r.eval_documents;
            for (std::string_view p : split_paragraphs(doc.text)) {
              int words = 0;
              const uint64_t h = paragraph_hash(p, &words);
              if (words >= o.min_words) paragraphs.insert(h);
            }
          },
          &eval_sums);
  }
  r.eval_paragraphs = paragraphs.size();
  return paragraphs;
}

// The written shard's numbers, for the manifest.
struct ShardInfo {
  uint64_t documents = 0, text_bytes = 0, file_bytes = 0, hash = 0;
};

// One train shard filtered into `dst`: the documents none of whose paragraphs is an evaluation
// paragraph, byte-identical; the removed ones counted in `dd`.
ShardInfo filter_shard(const fs::path& p, const fs::path& dst, const DecontaminateOptions& o,
                       const std::unordered_set<uint64_t>& paragraphs,
                       const corpus::ShardChecksums& sums, DecontaminateDomain& dd) {
  std::string out;
  ShardInfo info;
  for_each_jsonl_document(
      p.string(),
      [&](const text_corpus::Document& doc) {
        const std::string& text = doc.text;
        ++dd.documents;
        dd.bytes += text.size();
        bool hit = false;
        for (std::string_view para : split_paragraphs(text)) {
          int words = 0;
          const uint64_t h = paragraph_hash(para, &words);
          if (words >= o.min_words && paragraphs.count(h)) {
            hit = true;
            break;
          }
        }
        if (hit) {
          ++dd.removed;
          dd.removed_bytes += text.size();
          return;
        }
        out.append(doc.raw);
        out.push_back('\n');
        ++info.documents;
        info.text_bytes += text.size();
      },
      &sums);
  write_file_atomic(dst.string(), out);
  info.file_bytes = out.size();
  info.hash = XXH64(out.data(), out.size(), 0);
  return info;
}

// Every file of the corpus into the output: the train shards of `filtered` (relative path →
// domain) filtered, every other file copied as is (the manifest is rewritten afterwards).
// Returns the filtered shards' numbers by relative path.
std::map<std::string, ShardInfo> copy_corpus(const DecontaminateOptions& o,
                                             const corpus::ShardChecksums& sums,
                                             const std::map<std::string, std::string>& filtered,
                                             const std::unordered_set<uint64_t>& paragraphs,
                                             DecontaminateResult& r) {
  auto domain_of = [&](const std::string& d) -> DecontaminateDomain& {
    for (auto& x : r.domains)
      if (x.domain == d) return x;
    fail("internal: domain {}", d);
  };
  fs::create_directories(o.out);
  std::map<std::string, ShardInfo> written;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(o.corpus))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    const std::string rel = fs::relative(p, o.corpus).string();
    const fs::path dst = fs::path(o.out) / rel;
    fs::create_directories(dst.parent_path());
    if (rel == "manifest.json") continue;  // rewritten below
    const auto it = filtered.find(rel);
    if (it == filtered.end()) {
      if (o.verify && p.extension() == ".jsonl") sums.check(p, read_file(p.string()));
      fs::copy_file(p, dst, fs::copy_options::overwrite_existing);
      continue;
    }
    written[rel] = filter_shard(p, dst, o, paragraphs, sums, domain_of(it->second));
  }
  return written;
}

// The input's manifest with the filtered shards' numbers, their domains' train counts and the
// totals replaced.
void update_manifest_counts(json& m, const std::map<std::string, ShardInfo>& written,
                            const DecontaminateResult& r) {
  uint64_t removed_docs = 0, removed_bytes = 0;
  for (const auto& dd : r.domains) removed_docs += dd.removed, removed_bytes += dd.removed_bytes;
  if (m.contains("domains") && m["domains"].is_object()) {
    for (auto& [name, dom] : m["domains"].items()) {
      if (!dom.contains("shards") || !dom["shards"].is_array()) continue;
      uint64_t docs = 0, bytes = 0;
      bool touched = false;
      for (auto& s : dom["shards"]) {
        const auto w = written.find(s.value("file", ""));
        if (w == written.end()) continue;
        touched = true;
        s["documents"] = w->second.documents;
        s["text_bytes"] = w->second.text_bytes;
        s["file_bytes"] = w->second.file_bytes;
        s["xxh64"] = hex64(w->second.hash);
        docs += w->second.documents, bytes += w->second.text_bytes;
      }
      if (touched) {
        if (dom.contains("documents") && dom["documents"].is_object())
          dom["documents"]["train"] = docs;
        if (dom.contains("bytes") && dom["bytes"].is_object()) dom["bytes"]["train"] = bytes;
      }
    }
  }
  if (m.contains("totals") && m["totals"].is_object()) {
    auto& t = m["totals"];
    for (const char* key : {"documents", "bytes"}) {
      if (!t.contains(key) || !t[key].is_object()) continue;
      const uint64_t sub = std::string(key) == "documents" ? removed_docs : removed_bytes;
      for (const char* split : {"train", "all"})
        if (t[key].contains(split) && t[key][split].is_number_unsigned())
          t[key][split] = t[key][split].get<uint64_t>() - sub;
    }
  }
}

}  // namespace

DecontaminateResult decontaminate(const DecontaminateOptions& o) {
  check_paths(o);
  const std::string eval_root = o.eval_corpus.empty() ? o.corpus : o.eval_corpus;
  const auto eval_domains =
      o.eval_domains.empty() ? corpus_domains(eval_root, o.eval_split) : o.eval_domains;
  const auto train_domains =
      o.train_domains.empty() ? corpus_domains(o.corpus, "train") : o.train_domains;
  MARIN_CHECK(!eval_domains.empty(), "decontaminate: no evaluation domain with {} shards in {}",
              o.eval_split, eval_root);

  // The manifests' checksums, the corpus's first (its errors come first).
  const corpus::ShardChecksums sums(o.corpus, o.verify);
  DecontaminateResult r;
  const std::unordered_set<uint64_t> paragraphs =
      eval_paragraph_hashes(o, eval_root, eval_domains, r);
  // Train shards to filter: relative path → domain.
  std::map<std::string, std::string> filtered;
  for (const auto& d : train_domains) {
    const auto files = corpus_shards(o.corpus, d, "train");
    if (files.empty())
      fail("decontaminate: training domain '{}' has no train shards in {}", d, o.corpus);
    for (const auto& f : files) filtered[fs::relative(f, o.corpus).string()] = d;
    r.domains.push_back({d, 0, 0, 0, 0});
  }
  const std::map<std::string, ShardInfo> written = copy_corpus(o, sums, filtered, paragraphs, r);

  // The manifest: the input's, with the filtered shards' numbers replaced.
  json m = json::object();
  const fs::path in_manifest = fs::path(o.corpus) / "manifest.json";
  if (fs::exists(in_manifest)) m = load_json(in_manifest.string());
  update_manifest_counts(m, written, r);
  m["decontamination"] = {
      {"rule",
       "a training document is removed when one of its paragraphs (split on blank lines; "
       "lower-cased, punctuation deleted, whitespace-normalised; at least min_words words) "
       "equals a paragraph of an evaluation document (Paloma)"},
      {"min_words", o.min_words},
      {"source", o.corpus},
      {"eval_corpus", eval_root},
      {"eval_split", o.eval_split},
      {"eval_domains", eval_domains},
      {"result", r.to_json()}};
  write_file_atomic((fs::path(o.out) / "manifest.json").string(), m.dump(2) + "\n");
  return r;
}

}  // namespace marin::eval
