#pragma once
// Per-domain evaluation (recipe §7, docs/evaluation.md): a dropless forward over every document
// of each evaluation domain, scored whole (sliding windows for documents longer than seq_len);
// per domain documents, tokens, UTF-8 bytes, mean CE and bits per byte; macro loss and macro BPB
// (unweighted means over domains); and, when a training n-gram index is given, the same numbers
// over clean-only and contaminated-only documents.
//
//   Model<float> m(cfg, 8, ModelUse::Inference); load_params(ckpt, m.table(), m.params().data());
//   eval::EvalOptions o; o.token_dir = "tok"; o.corpus = "data/fixture";
//   eval::EvalReport r = eval::evaluate_domains(m, o);
//   fmt::print("{}", r.table());
//
// Sliding-window rule (document of n tokens, n − 1 predictions; position p predicts token p+1):
// if n − 1 ≤ S (= seq_len) one window scores all of them. Otherwise the first window is tokens
// [0, S) and scores positions [0, S); each next window scores the next `stride` positions
// [e, e') (e' = min(e + stride, n − 1)) with input tokens [e' − S, e'), so every position is scored
// exactly once, the last window is full, and every position after the first window sees at least
// S − stride + 1 tokens of its own document (itself included). Short documents (and windows)
// are packed into rows with segment ids, which the model never attends across.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/contamination.hpp"
#include "model/model.hpp"
#include "parallel/comm.hpp"

namespace marin::eval {

// Documents as token sequences (each ends with EOS when the tokenizer has one).
struct DocTokens {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> offsets{0};
  uint64_t count() const { return offsets.size() - 1; }
  uint64_t size(uint64_t d) const { return offsets[d + 1] - offsets[d]; }
  const int32_t* doc(uint64_t d) const { return tokens.data() + offsets[d]; }
  void add(const int32_t* t, uint64_t n) {
    tokens.insert(tokens.end(), t, t + n);
    offsets.push_back(tokens.size());
  }
};

struct Window {
  uint64_t begin = 0, len = 0;              // input tokens [begin, begin + len)
  uint64_t score_begin = 0, score_end = 0;  // positions scored (position p predicts token p + 1)
};
// The windows of a document of n tokens (none when n < 2); see the rule above.
std::vector<Window> plan_windows(uint64_t n, int64_t seq_len, int64_t stride);

struct DocScore {
  double ce = 0;             // Σ CE (nats) over the document's predictions
  uint64_t predictions = 0;  // n − 1 for a document of n ≥ 1 tokens
};
// Scores every document (dropless, max_batch rows per forward); stride ≤ 0 means seq_len / 2.
// progress(k) is called with the number of predictions just scored. With a group of N ranks
// each rank scores a contiguous run of documents with about 1/N of the predictions and the
// per-document sums are all-reduced, so every rank returns the same scores as one process.
std::vector<DocScore> score_documents(Model<float>& m, const DocTokens& docs, int64_t stride,
                                      const std::function<void(uint64_t)>& progress = {},
                                      parallel::Comm* group = nullptr);

struct EvalOptions {
  std::string token_dir;             // `marin tokenize` output (manifest.json + shards)
  std::vector<std::string> domains;  // empty: every domain with `split` shards
  std::string split = "valid";
  // The text corpus the shards were tokenized from (ROOT/<domain>/<split>-NNNNN.jsonl), for
  // per-document UTF-8 bytes and the contamination audit; "" = no text (bytes from the shard
  // headers, no audit). Counts and bytes must match the token shards (else marin::Error).
  std::string corpus;
  int64_t stride = 0;  // 0: seq_len / 2
  // A fixed subset per domain, for evaluations repeated during training (ladders, forecasts):
  // documents in shard order, each taken only if it fits in what is left of max_tokens (the first
  // document is always taken). Deterministic, so every evaluation scores the same documents.
  // 0 = every document. Needs the text corpus (the subset's bytes are per document).
  uint64_t max_tokens = 0;
  uint64_t tokenizer_hash = 0;  // the model's tokenizer; ≠ 0 and ≠ the shards' → marin::Error
  bool skip_empty = false;      // an empty domain is skipped with a warning instead of an error
  const NgramIndex* index = nullptr;  // training n-grams: enables the audit (needs corpus)
  double threshold = 0.0;             // contaminated when overlap fraction > threshold
  bool progress = true;               // progress on stderr (plain lines off a terminal)
  parallel::Comm* group = nullptr;    // ranks that split the documents (null: this process)
};

// Sums over a set of documents.
struct Subset {
  uint64_t documents = 0, tokens = 0, predictions = 0, bytes = 0;
  double ce = 0;  // Σ CE nats
  void add(const DocScore& s, uint64_t tokens, uint64_t bytes);
  bool empty() const { return predictions == 0; }
  double mean_ce() const { return predictions ? ce / double(predictions) : 0.0; }
  double bpb() const;              // ce / (ln 2 · bytes)
  nlohmann::json to_json() const;  // mean_ce / bpb are null when empty
};

// One audited document: its id (the corpus's "id", else FILE:LINE), its n-gram overlap with the
// training text and the decision.
struct AuditedDocument {
  std::string id;
  Overlap overlap;
  bool contaminated = false;
};

struct DomainResult {
  std::string domain;
  Subset all, clean, contaminated;
  bool per_document_bytes = false;  // bytes from the text corpus (else from shard headers)
  bool audited = false;
  uint64_t unchecked = 0;  // documents with fewer than n words (counted clean)
  // Mean of the overlap fraction over the checked documents (every document with at least n
  // words, flagged or not): the `overlap` column.
  double mean_overlap = 0;
  double expected_false_positives = 0;     // Σ_doc 1 − (1 − fp)^ngrams
  std::vector<AuditedDocument> documents;  // every scored document, in shard order, when audited
  nlohmann::json to_json() const;
};

struct Macro {
  std::optional<double> loss, bpb;  // unset when no domain has documents in the subset
  int domains = 0;
  nlohmann::json to_json() const;
};

struct EvalReport {
  std::vector<DomainResult> domains;
  std::vector<std::string> skipped;  // empty domains skipped (skip_empty)
  Macro macro, macro_clean, macro_contaminated;
  bool audited = false;
  nlohmann::json audit;  // the index's to_json() + threshold, when audited
  int64_t seq_len = 0, stride = 0;
  double seconds = 0;
  uint64_t predictions = 0;
  double tokens_per_s() const { return seconds > 0 ? double(predictions) / seconds : 0.0; }

  nlohmann::json to_json() const;
  std::string table() const;  // the terminal table
};

// Macro over the domains' subsets (unweighted mean over the domains where the subset is not empty).
Macro macro_of(const std::vector<DomainResult>& d, Subset DomainResult::*which);

// The evaluation. Uses the model's weights as they are (transport forced dropless for the call
// and restored). Overwrites the model's saved activations: call it between training steps.
EvalReport evaluate_domains(Model<float>& m, const EvalOptions& opts);

}  // namespace marin::eval
