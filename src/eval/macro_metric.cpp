#include "eval/macro_metric.hpp"

#include "core/error.hpp"

namespace marin::eval {
using json = nlohmann::json;

json MacroMetric::to_json() const {
  json tr = json::array();
  for (const auto& s : train) tr.push_back({{"domain", s.domain}, {"split", s.split}});
  return {{"metric", "macro_loss"},
          {"token_dir", token_dir},
          {"corpus", corpus},
          {"domains", domains},
          {"max_tokens", max_tokens},
          {"stride", stride},
          {"train", tr},
          {"train_corpus", train_corpus},
          {"ngram", ngram},
          {"threshold", threshold}};
}

MacroMetric MacroMetric::from_json(const json& j, const std::string& origin) {
  if (!j.is_object()) fail("{}: the macro-loss metric must be an object", origin);
  MacroMetric m;
  auto get = [&](const char* key, auto& into) {
    if (!j.contains(key)) return;
    try {
      j.at(key).get_to(into);
    } catch (const json::exception&) {
      fail("{}: field '{}' has the wrong type ({})", origin, key, j.at(key).dump());
    }
  };
  get("token_dir", m.token_dir);
  get("corpus", m.corpus);
  get("domains", m.domains);
  get("max_tokens", m.max_tokens);
  get("stride", m.stride);
  get("train_corpus", m.train_corpus);
  get("ngram", m.ngram);
  get("threshold", m.threshold);
  if (m.token_dir.empty()) fail("{}: field 'token_dir' is required", origin);
  if (j.contains("train")) {
    if (!j["train"].is_array()) fail("{}: field 'train' must be a list", origin);
    for (const auto& s : j["train"]) {
      if (!s.is_object() || !s.contains("domain") || !s["domain"].is_string())
        fail("{}: field 'train' has an entry without a \"domain\": {}", origin, s.dump());
      m.train.push_back({s["domain"].get<std::string>(), s.value("split", "train")});
    }
  }
  return m;
}

std::vector<TrainSource> mixture_sources(const MixtureConfig& mix) {
  std::vector<TrainSource> out;
  for (size_t i = 0; i < mix.sources.size(); ++i) {
    bool used = false;
    for (const auto& ph : mix.phases) used |= i < ph.weights.size() && ph.weights[i] > 0;
    if (used) out.push_back({mix.sources[i].domain, mix.sources[i].split});
  }
  return out;
}

MacroEvaluator::MacroEvaluator(MacroMetric metric, uint64_t tokenizer_hash)
    : metric_(std::move(metric)), tokenizer_hash_(tokenizer_hash) {
  if (metric_.train.empty()) return;
  if (metric_.corpus.empty())
    fail("macro-loss metric: the contamination audit needs the evaluation text (corpus)");
  IndexOptions io;
  io.n = metric_.ngram;
  io.progress = false;
  index_ = build_ngram_index(
      TrainText{metric_.train_corpus.empty() ? metric_.corpus : metric_.train_corpus,
                metric_.train},
      io);
}

EvalReport MacroEvaluator::evaluate(Model<float>& m, parallel::Comm* group) const {
  EvalOptions o;
  o.token_dir = metric_.token_dir;
  o.corpus = metric_.corpus;
  o.domains = metric_.domains;
  o.max_tokens = metric_.max_tokens;
  o.stride = metric_.stride;
  o.tokenizer_hash = tokenizer_hash_;
  o.index = index_ ? &*index_ : nullptr;
  o.threshold = metric_.threshold;
  o.progress = false;
  o.group = group;
  return evaluate_domains(m, o);
}

json summary(const EvalReport& r) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json domains = json::object();
  uint64_t docs = 0, contaminated = 0;
  for (const auto& d : r.domains) {
    domains[d.domain] = {{"ce", d.all.mean_ce()}, {"bpb", d.all.bpb()}};
    docs += d.all.documents;
    contaminated += d.contaminated.documents;
  }
  json s = {{"macro_loss", opt(r.macro.loss)},
            {"macro_bpb", opt(r.macro.bpb)},
            {"documents", docs},
            {"domains", domains}};
  if (r.audited) {
    s["clean_macro_loss"] = opt(r.macro_clean.loss);
    s["clean_macro_bpb"] = opt(r.macro_clean.bpb);
    s["contaminated_documents"] = contaminated;
  }
  return s;
}

}  // namespace marin::eval
