#pragma once
// The macro loss as a fixed metric (docs/scaling.md, "The macro-loss metric"). A ladder, its
// forecast and the target run must be scored on exactly the same documents with the same audit,
// so the definition travels with them: ladder.json and forecast.json carry MacroMetric::to_json(),
// and `marin train --forecast` rebuilds the evaluator from it.
//
//   eval::MacroEvaluator ev(metric, tokenizer_hash);   // builds the n-gram index once
//   eval::EvalReport r = ev.evaluate(model);            // macro, clean-only, contaminated-only
//   nlohmann::json s = eval::summary(r);                // the compact record for metrics.jsonl
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/mixture.hpp"
#include "eval/contamination.hpp"
#include "eval/domain_eval.hpp"

namespace marin::eval {

struct MacroMetric {
  std::string token_dir;             // `marin tokenize` output (its valid shards are scored)
  std::string corpus;                // the text of those shards ("": none; no budget, no audit)
  std::vector<std::string> domains;  // empty: every domain with valid shards
  uint64_t max_tokens = 0;           // per-domain budget (EvalOptions::max_tokens); 0: all
  int64_t stride = 0;                // sliding-window stride (0: seq_len / 2)
  std::vector<TrainSource> train;    // the training text of the audit (empty: no audit)
  std::string train_corpus;          // where `train` is ("": corpus)
  int ngram = 13;
  double threshold = 0;

  nlohmann::json to_json() const;
  // marin::Error naming `origin` and the field for a missing or ill-typed field.
  static MacroMetric from_json(const nlohmann::json& j, const std::string& origin);
};

// The sources a mixture trains on: those with a positive weight in some phase.
std::vector<TrainSource> mixture_sources(const MixtureConfig& mix);

class MacroEvaluator {
 public:
  // Builds the n-gram index of the metric's training text (once). A tokenizer hash ≠ 0 is
  // checked against the token shards at every evaluation.
  explicit MacroEvaluator(MacroMetric metric, uint64_t tokenizer_hash = 0);
  // group: ranks that split the documents (null: this process).
  EvalReport evaluate(Model<float>& m, parallel::Comm* group = nullptr) const;
  const MacroMetric& metric() const { return metric_; }

 private:
  MacroMetric metric_;
  uint64_t tokenizer_hash_ = 0;
  std::optional<NgramIndex> index_;
};

// {macro_loss, macro_bpb, clean_macro_loss, clean_macro_bpb (when audited), contaminated_documents,
//  documents, domains: {name: {ce, bpb}}}; a subset with no documents gives null.
nlohmann::json summary(const EvalReport& r);

}  // namespace marin::eval
