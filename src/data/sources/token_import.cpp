// Pre-tokenized imports: llm.c and Megatron-LM token files -> token shards + manifest
// (token_import.hpp, docs/data.md "Pre-tokenized imports").
#include "data/sources/token_import.hpp"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/progress.hpp"
#include "data/corpus/corpus.hpp"
#include "data/sources/llmc_file.hpp"
#include "data/sources/megatron_file.hpp"
#include "data/sources/split_rule.hpp"
#include "data/sources/token_import_reader.hpp"
#include "data/text_corpus.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace marin::data {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The documents of one split, cut into shards <domain>/<split>-NNNNN.tok as they fill.
class SplitShards {
 public:
  SplitShards(TokenManifest& m, std::string domain, std::string split, uint64_t shard_tokens)
      : m_(m), domain_(std::move(domain)), split_(std::move(split)), limit_(shard_tokens) {}

  void add(const std::vector<uint32_t>& doc, uint64_t text_bytes) {
    tokens_.insert(tokens_.end(), doc.begin(), doc.end());
    offsets_.push_back(tokens_.size());
    text_bytes_ += text_bytes;
    if (tokens_.size() >= limit_) flush();
  }

  void flush() {
    if (offsets_.size() == 1) return;  // no document since the last shard
    const std::string stem = fs::path(text_corpus::shard_name(split_, index_++)).stem().string();
    TokenShardInfo info{text_corpus::token_shard_file(domain_, stem),
                        domain_,
                        split_,
                        offsets_.size() - 1,
                        tokens_.size(),
                        text_bytes_};
    write_token_shard(m_.path(info), m_.vocab_size, m_.tokenizer_hash, text_bytes_, offsets_,
                      tokens_);
    m_.shards.push_back(std::move(info));
    tokens_.clear();
    offsets_.assign(1, 0);
    text_bytes_ = 0;
  }

 private:
  TokenManifest& m_;
  std::string domain_, split_;
  uint64_t limit_;
  uint64_t index_ = 0;
  std::vector<uint32_t> tokens_;
  std::vector<uint64_t> offsets_{0};
  uint64_t text_bytes_ = 0;
};

void check_options(const TokenImportOptions& o) {
  if (!is_token_format(o.format))
    fail("token import: format '{}' is not one of llmc, megatron", o.format);
  if (o.inputs.empty()) fail("token import: no input files (--in FILE...)");
  if (o.out.empty()) fail("token import: no output directory (--out DIR)");
  if (o.domain.empty() || o.domain == "." || o.domain == ".." ||
      o.domain.find('/') != std::string::npos)
    fail(
        "token import: --domain '{}' must name one directory level (the domain a mixture names), "
        "e.g. --domain web",
        o.domain);
  if (!(o.valid_fraction >= 0 && o.valid_fraction <= 1))
    fail("token import: --valid-fraction {} is outside [0, 1]", o.valid_fraction);
  if (o.shard_tokens == 0) fail("token import: shard_tokens must be positive");
}

}  // namespace

bool is_token_format(const std::string& format) {
  return format == "llmc" || format == "megatron";
}

TokenManifest import_token_files(const Tokenizer& tok, const TokenImportOptions& o) {
  check_options(o);
  const TokenVocab vocab(tok);
  const std::optional<uint32_t> eos = tok.eos();

  // The files read, with their sizes and hashes (the manifest's "sources").
  std::vector<std::string> files;
  std::vector<MegatronPaths> datasets;
  if (o.format == "megatron") {
    for (const std::string& in : o.inputs) {
      datasets.push_back(megatron_paths(in));
      files.push_back(datasets.back().idx);
      files.push_back(datasets.back().bin);
    }
  } else {
    files = o.inputs;
  }
  json sources = json::array();
  uint64_t total = 0;
  for (const std::string& f : files) {
    const std::string hash = corpus::xxh64_file_hex(f);  // open_input: refuses FIFOs, dirs
    std::error_code ec;
    const uint64_t size = fs::file_size(f, ec);
    if (ec) fail("{}: cannot read its size: {}", f, ec.message());
    total += size;
    sources.push_back({{"path", f}, {"size", size}, {"xxh64", hash}});
  }

  TokenManifest m;
  m.dir = o.out;
  m.tokenizer_hash = tok.hash();
  m.vocab_size = tok.vocab_size();
  m.corpus = o.format + " import";
  fs::create_directories(fs::path(o.out) / o.domain);
  SplitShards train(m, o.domain, "train", o.shard_tokens),
      valid(m, o.domain, "valid", o.shard_tokens);
  uint64_t documents = 0, eos_appended = 0;
  // Every document ends in EOS, as encode_document ends a tokenized one.
  const DocumentSink sink = [&](std::vector<uint32_t>& doc) {
    if (eos && (doc.empty() || doc.back() != *eos)) {
      doc.push_back(*eos);
      ++eos_appended;
    }
    uint64_t bytes = 0;
    for (uint32_t id : doc) bytes += vocab.text_bytes(id);
    const std::string_view key(reinterpret_cast<const char*>(doc.data()), doc.size() * 4);
    (split_for(key, o.valid_fraction) == "valid" ? valid : train).add(doc, bytes);
    ++documents;
  };
  Progress progress(o.progress ? total : 0, "import", "B");
  const BytesRead on_bytes = [&](uint64_t n) {
    if (o.progress) progress.add(n);
  };
  if (o.format == "llmc") {
    LlmcStream stream(tok, vocab, sink, on_bytes);
    for (const std::string& f : o.inputs) stream.read(f);
    stream.finish();
  } else {
    for (const MegatronPaths& p : datasets) read_megatron(p, vocab, sink, on_bytes);
  }
  progress.finish();
  if (documents == 0)
    fail("token import: the inputs ({}{}) hold no document", files.front(),
         files.size() > 1 ? fmt::format(" and {} more", files.size() - 1) : "");
  train.flush();
  valid.flush();
  std::sort(m.shards.begin(), m.shards.end(),
            [](const TokenShardInfo& a, const TokenShardInfo& b) { return a.file < b.file; });

  json j = m.to_json();
  j["sources"] = std::move(sources);
  j["import"] = {{"format", o.format},
                 {"documents", documents},
                 {"eos_appended", eos_appended},
                 {"valid_fraction", o.valid_fraction},
                 {"eos_rule",
                  "each document ends in the tokenizer's EOS: kept once when the file's document "
                  "already ends in it, appended otherwise; llm.c's leading delimiters dropped"}};
  write_file_atomic((fs::path(o.out) / "manifest.json").string(), j.dump(2) + "\n");
  return m;
}

}  // namespace marin::data
