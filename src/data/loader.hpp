#pragma once
// Batch sources over token shards (docs/data.md):
//
//  * MixtureLoader — training rows from a weighted, phase-switched mixture of sources. Row r reads
//    from the source chosen by (seed, r) and the phase of step r / rows_per_step; each source is a
//    stream of its documents in a keyed Feistel order (a new key per epoch), packed into rows
//    that continue a document into the source's next row. Deterministic; state()/restore() resume
//    exactly.
//  * ValidationSource — every document of the given shards in order, packed the same way, the
//    last row padded; for evaluation.
//
// Packing rules (both): a row holds seq_len input tokens; labels[i] is the token that follows
// tokens[i] in the same document, or −1 when tokens[i] is the document's last token (its EOS), so
// nothing is ever predicted across a document boundary and no in-document transition is lost
// between rows. seg[i] numbers the document pieces of a row from 0; padding has token 0,
// label −1, seg −1.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "data/batch_source.hpp"
#include "data/feistel.hpp"
#include "data/mixture.hpp"
#include "data/shards.hpp"

namespace marin {

struct LoaderOptions {
  std::string token_dir;        // the output of `marin tokenize` (manifest.json + shards)
  int64_t seq_len = 0;          // tokens per row
  int64_t rows_per_step = 0;    // rows of one optimizer step (global batch): schedule steps count
                                // rows_per_step rows, however next() is called
  int64_t total_steps = 0;      // resolves phases given as start_fraction
  uint64_t seed = 0;            // source choice and document order
  uint64_t tokenizer_hash = 0;  // shards must carry this hash; 0 = the manifest's hash
  uint32_t vocab_size = 0;      // > 0: shards must have this vocabulary size
  int64_t mix_block = 4096;     // rows per mixing block (exact proportions per block)
};

// One source's position and accounting.
struct SourceStats {
  std::string name, domain, split;
  uint64_t documents = 0, tokens = 0;  // of the source
  uint64_t epoch = 0;                  // completed passes (wraps)
  uint64_t pos = 0;                    // position in the current epoch's order
  uint64_t offset = 0;                 // tokens of the current document already emitted
  uint64_t rows = 0;                   // rows read from this source
};

class MixtureLoader : public BatchSource {
 public:
  // Reads the manifest, checks the config against it (domains exist, weights valid) and opens
  // every shard of every source (validating each against the tokenizer hash and vocab size).
  MixtureLoader(const MixtureConfig& config, const LoaderOptions& opts);
  ~MixtureLoader() override;

  void next(int B, int32_t* tokens, int32_t* labels, int32_t* seg) override;
  nlohmann::json state() const override;
  // Resumes exactly at a position from state(). marin::Error when the state belongs to another
  // configuration (seed, seq_len, rows_per_step, mix_block, sources or their sizes differ).
  void restore(const nlohmann::json& state) override;
  std::string describe() const override;

  int64_t row() const { return row_; }  // rows emitted so far
  int64_t step() const { return row_ / opts_.rows_per_step; }
  // The source row r reads from (a pure function of the configuration, seed and r).
  int source_of_row(int64_t r) const;
  // The source of each row of the last next() call.
  std::span<const int> last_sources() const { return last_sources_; }
  const MixtureConfig& config() const { return config_; }
  std::vector<SourceStats> stats() const;

  struct Stream;

 private:
  MixtureConfig config_;
  LoaderOptions opts_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::vector<double>> cumulative_;  // per phase: normalised cumulative weights
  int64_t row_ = 0;
  std::vector<int> last_sources_;
};

class ValidationSource : public BatchSource {
 public:
  ValidationSource(const std::vector<std::string>& shard_paths, int64_t seq_len,
                   uint64_t tokenizer_hash, uint32_t vocab_size = 0);
  // Shards already opened (and checked against their manifest: TokenManifest::open).
  ValidationSource(std::vector<TokenShard> shards, int64_t seq_len);
  // All valid shards of one domain of a token directory (hash 0 = the manifest's).
  static std::unique_ptr<ValidationSource> for_domain(const std::string& token_dir,
                                                      const std::string& domain, int64_t seq_len,
                                                      uint64_t tokenizer_hash = 0,
                                                      uint32_t vocab_size = 0,
                                                      const std::string& split = "valid");
  ~ValidationSource() override;

  // Rows past the end are padding (labels −1, seg −1).
  void next(int B, int32_t* tokens, int32_t* labels, int32_t* seg) override;
  nlohmann::json state() const override;
  void restore(const nlohmann::json& state) override;
  std::string describe() const override;

  int64_t total_rows() const { return total_rows_; }  // ceil(tokens / seq_len)
  int64_t row() const { return row_; }
  bool done() const { return row_ >= total_rows_; }
  uint64_t documents() const { return documents_; }
  uint64_t tokens() const { return tokens_; }
  uint64_t text_bytes() const { return text_bytes_; }  // UTF-8 bytes, for bits per byte
  // Tokens with a label ≥ 0 over the whole pass: tokens − non-empty documents.
  uint64_t scored_tokens() const { return scored_; }

 private:
  std::vector<TokenShard> shards_;
  int64_t seq_len_;
  uint64_t documents_ = 0, tokens_ = 0, text_bytes_ = 0, scored_ = 0;
  int64_t total_rows_ = 0;
  int64_t row_ = 0;
  size_t shard_ = 0;  // position: shard, document in it, tokens of it emitted
  uint64_t doc_ = 0, offset_ = 0;
};

}  // namespace marin
