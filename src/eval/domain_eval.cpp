// Per-domain evaluation: document scoring with sliding windows, per-domain sums, the macro
// numbers and the contamination split. See domain_eval.hpp and docs/evaluation.md.
#include "eval/domain_eval.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>

#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/progress.hpp"
#include "data/shards.hpp"
#include "data/text_corpus.hpp"
#include "eval/row_packer.hpp"

namespace marin::eval {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<Window> plan_windows(uint64_t n, int64_t seq_len, int64_t stride) {
  MARIN_CHECK(seq_len >= 1, "plan_windows: seq_len must be ≥ 1, got {}", seq_len);
  MARIN_CHECK(stride >= 1 && stride <= seq_len, "sliding window: stride {} not in [1, seq_len={}]",
              stride, seq_len);
  std::vector<Window> w;
  if (n < 2) return w;
  const uint64_t P = n - 1, S = uint64_t(seq_len);
  if (P <= S) {
    w.push_back({0, std::min(n, S), 0, P});
    return w;
  }
  w.push_back({0, S, 0, S});
  for (uint64_t end = S; end < P;) {
    const uint64_t e = std::min(end + uint64_t(stride), P);
    w.push_back({e - S, S, end, e});
    end = e;
  }
  return w;
}

std::vector<DocScore> score_documents(Model<float>& m, const DocTokens& docs, int64_t stride,
                                      const std::function<void(uint64_t)>& progress,
                                      parallel::Comm* group) {
  const int64_t S = m.config().seq_len;
  const int B = m.max_batch();
  if (stride <= 0) stride = std::max<int64_t>(1, S / 2);
  std::vector<DocScore> out(docs.count());
  uint64_t total = 0;
  for (uint64_t d = 0; d < docs.count(); ++d)
    total += out[d].predictions = docs.size(d) ? docs.size(d) - 1 : 0;
  // This rank's documents [first, last): cut where the running prediction count passes r/N.
  uint64_t first = 0, last = docs.count();
  if (group && group->size() > 1) {
    const int N = group->size(), r = group->rank();
    uint64_t acc = 0;
    first = last = docs.count();
    for (uint64_t d = 0; d < docs.count(); ++d) {
      if (first == docs.count() && acc * uint64_t(N) >= total * uint64_t(r)) first = d;
      if (acc * uint64_t(N) >= total * uint64_t(r + 1)) {
        last = d;
        break;
      }
      acc += out[d].predictions;
    }
    if (first > last) first = last;
  }

  bool converted = false;  // the weights' bf16 copy: made by the first forward, then reused
  RowPacker packer(B, S, [&](Batch batch, const int64_t* owner) {
    batch.same_weights = std::exchange(converted, true);
    batch.evaluation = true;  // dropless, recipe §8
    m.forward(batch);
    const float* ce = m.token_ce();
    uint64_t scored = 0;
    for (size_t i = 0; i < size_t(batch.B) * size_t(S); ++i)
      if (owner[i] >= 0) out[size_t(owner[i])].ce += double(ce[i]), ++scored;
    if (progress) progress(scored);
  });
  for (uint64_t d = first; d < last; ++d) {
    const int32_t* x = docs.doc(d);
    for (const Window& w : plan_windows(docs.size(d), S, stride))
      packer.add(x + w.begin, int64_t(w.len), int64_t(w.score_begin - w.begin),
                 int64_t(w.score_end - w.begin), int64_t(d));
  }
  packer.flush();
  if (group && group->size() > 1) {
    std::vector<double> ce(out.size());
    for (size_t d = 0; d < out.size(); ++d) ce[d] = out[d].ce;
    group->allreduce(ce.data(), int64_t(ce.size()));
    for (size_t d = 0; d < out.size(); ++d) out[d].ce = ce[d];
  }
  return out;
}

// --- sums ---

void Subset::add(const DocScore& s, uint64_t t, uint64_t b) {
  ++documents;
  tokens += t;
  predictions += s.predictions;
  bytes += b;
  ce += s.ce;
}

double Subset::bpb() const {
  return bytes ? ce / (std::log(2.0) * double(bytes)) : 0.0;
}

json Subset::to_json() const {
  json j = {{"documents", documents},
            {"tokens", tokens},
            {"predictions", predictions},
            {"bytes", bytes},
            {"ce_sum", ce}};
  j["mean_ce"] = empty() ? json(nullptr) : json(mean_ce());
  j["bpb"] = empty() || bytes == 0 ? json(nullptr) : json(bpb());
  return j;
}

json DomainResult::to_json() const {
  json j = {{"all", all.to_json()}, {"per_document_bytes", per_document_bytes}};
  if (audited) {
    j["clean"] = clean.to_json();
    j["contaminated"] = contaminated.to_json();
    j["unchecked_short_documents"] = unchecked;
    j["mean_overlap"] = mean_overlap;
    j["expected_false_positive_documents"] = expected_false_positives;
    json docs = json::array();
    for (const AuditedDocument& d : documents)
      docs.push_back({{"id", d.id},
                      {"ngrams", d.overlap.ngrams},
                      {"found", d.overlap.found},
                      {"overlap", d.overlap.fraction()},
                      {"contaminated", d.contaminated}});
    j["audited_documents"] = docs;
  }
  return j;
}

json Macro::to_json() const {
  return {{"loss", loss ? json(*loss) : json(nullptr)},
          {"bpb", bpb ? json(*bpb) : json(nullptr)},
          {"domains", domains}};
}

Macro macro_of(const std::vector<DomainResult>& d, Subset DomainResult::*which) {
  Macro m;
  double loss = 0, bpb = 0;
  int with_bytes = 0;
  for (const auto& r : d) {
    const Subset& s = r.*which;
    if (s.empty()) continue;
    ++m.domains;
    loss += s.mean_ce();
    if (s.bytes) bpb += s.bpb(), ++with_bytes;
  }
  if (m.domains) m.loss = loss / m.domains;
  if (m.domains && with_bytes == m.domains) m.bpb = bpb / m.domains;
  return m;
}

json EvalReport::to_json() const {
  json d = json::object();
  for (const auto& r : domains) d[r.domain] = r.to_json();
  json j = {{"format", "marin-eval/1"},   {"seq_len", seq_len},
            {"stride", stride},           {"seconds", seconds},
            {"predictions", predictions}, {"tokens_per_s", tokens_per_s()},
            {"macro", macro.to_json()},   {"domains", d},
            {"skipped", skipped}};
  if (audited) {
    j["macro_clean"] = macro_clean.to_json();
    j["macro_contaminated"] = macro_contaminated.to_json();
    j["audit"] = audit;
  } else {
    j["audit"] = nullptr;
  }
  return j;
}

namespace {

std::string num(double x, bool have, int prec = 4) {
  return have ? fmt::format("{:.{}f}", x, prec) : std::string("-");
}
std::string opt(const std::optional<double>& x) {
  return x ? fmt::format("{:.4f}", *x) : "-";
}

}  // namespace

std::string EvalReport::table() const {
  size_t w = 6;
  for (const auto& r : domains) w = std::max(w, r.domain.size());
  w = std::max<size_t>(w, 18);
  std::string s;
  s += fmt::format("{:<{}} {:>6} {:>9} {:>10} {:>7} {:>7}", "domain", w, "docs", "tokens", "bytes",
                   "loss", "bpb");
  if (audited)
    s += fmt::format(" | {:>6} {:>9} {:>7} | {:>7} {:>7} | {:>7} {:>7}", "contam", "c.tokens",
                     "overlap", "clean", "bpb", "contam", "bpb");
  s += "\n";
  for (const auto& r : domains) {
    s += fmt::format("{:<{}} {:>6} {:>9} {:>10} {:>7} {:>7}", r.domain, w, r.all.documents,
                     r.all.tokens, r.all.bytes, num(r.all.mean_ce(), !r.all.empty()),
                     num(r.all.bpb(), !r.all.empty() && r.all.bytes));
    if (audited)
      s += fmt::format(" | {:>6} {:>9} {:>7} | {:>7} {:>7} | {:>7} {:>7}", r.contaminated.documents,
                       r.contaminated.tokens, num(r.mean_overlap, true, 3),
                       num(r.clean.mean_ce(), !r.clean.empty()),
                       num(r.clean.bpb(), !r.clean.empty()),
                       num(r.contaminated.mean_ce(), !r.contaminated.empty()),
                       num(r.contaminated.bpb(), !r.contaminated.empty()));
    s += "\n";
  }
  const std::string label = fmt::format("macro ({} domains)", macro.domains);
  s += fmt::format("{:<{}} {:>6} {:>9} {:>10} {:>7} {:>7}", label, w, "", "", "", opt(macro.loss),
                   opt(macro.bpb));
  if (audited)
    s += fmt::format(" | {:>6} {:>9} {:>7} | {:>7} {:>7} | {:>7} {:>7}", "", "", "",
                     opt(macro_clean.loss), opt(macro_clean.bpb), opt(macro_contaminated.loss),
                     opt(macro_contaminated.bpb));
  s += "\n";
  if (audited)
    s += fmt::format(
        "clean macro over {} domains, contaminated-only macro over {} domains (those with such "
        "documents); contaminated: {}-gram overlap > {} (Bloom false-positive rate {:.2e} per "
        "n-gram)\n",
        macro_clean.domains, macro_contaminated.domains, audit.value("n", 13),
        audit.value("threshold", 0.0), audit.value("fp_rate", 0.0));
  s += fmt::format("{} predictions in {:.1f} s ({:.0f} tokens/s), seq_len {}, stride {}\n",
                   predictions, seconds, tokens_per_s(), seq_len, stride);
  return s;
}

namespace {

// Refuses shards, a model and options that do not go together, before any work.
void check_eval_inputs(const ModelConfig& cfg, const TokenManifest& man, const EvalOptions& o) {
  if (o.tokenizer_hash && o.tokenizer_hash != man.tokenizer_hash)
    fail(
        "tokenizer mismatch: the model's tokenizer has hash {} but the token shards in {} "
        "were made with a tokenizer of hash {}; evaluate with shards tokenized by the "
        "checkpoint's tokenizer.json",
        hex64(o.tokenizer_hash), o.token_dir, hex64(man.tokenizer_hash));
  if (int64_t(man.vocab_size) > cfg.vocab_size)
    fail("token shards in {} have a vocabulary of {} but the model has {}", o.token_dir,
         man.vocab_size, cfg.vocab_size);
  if (o.index && o.corpus.empty())
    fail("contamination audit: the evaluation text is needed (give the text corpus)");
  if (o.max_tokens > 0 && o.corpus.empty())
    fail("a token budget per domain ({}) needs the text corpus for the subset's bytes",
         o.max_tokens);
}

// The domains asked for, or else every domain with shards of the split; each must exist.
std::vector<std::string> domains_to_evaluate(const TokenManifest& man, const EvalOptions& o) {
  std::vector<std::string> domains = o.domains;
  const std::vector<std::string> all = man.domains();
  if (domains.empty()) {
    for (const auto& d : all)
      if (!man.find(d, o.split).empty()) domains.push_back(d);
    if (domains.empty()) fail("token directory {}: no domain has {} shards", o.token_dir, o.split);
  }
  for (const auto& d : domains)
    if (std::find(all.begin(), all.end(), d) == all.end())
      fail("token directory {}: no domain '{}' (available: {})", o.token_dir, d,
           fmt::join(all, ", "));
  return domains;
}

// One domain's documents to score, with their text's bytes and overlaps where the text corpus
// is given.
struct DomainDocs {
  DocTokens docs;
  std::vector<uint64_t> bytes;
  std::vector<Overlap> overlap;
  std::vector<std::string> ids;  // of the audited documents
  uint64_t header_bytes = 0;
};

// Reads the domain's token shards (within the token budget, if any) and, from the text corpus,
// each taken document's bytes and n-gram overlap, checking that the two agree.
DomainDocs load_domain_docs(const TokenManifest& man, const EvalOptions& o,
                            const std::string& domain) {
  DomainDocs in;
  uint64_t budget = o.max_tokens;  // what is left of the domain's token budget
  for (const TokenShardInfo& info : man.find(domain, o.split)) {
    const TokenShard sh = man.open(info, man.tokenizer_hash, man.vocab_size);
    std::vector<int32_t> buf;
    std::vector<bool> taken(sh.documents(), true);
    for (uint64_t d = 0; d < sh.documents(); ++d) {
      if (o.max_tokens > 0) {
        const bool first = in.docs.count() == 0;
        taken[d] = first || sh.doc_size(d) <= budget;
        if (!taken[d]) continue;
        budget -= std::min<uint64_t>(budget, sh.doc_size(d));
      }
      buf.resize(sh.doc_size(d));
      sh.copy(sh.doc_begin(d), buf.size(), buf.data());
      in.docs.add(buf.data(), buf.size());
    }
    in.header_bytes += sh.header().text_bytes;
    if (o.corpus.empty()) continue;
    const fs::path text = fs::path(o.corpus) / domain / text_corpus::text_shard_name(info.file);
    if (!fs::exists(text))
      fail("text corpus {}: {} is missing (the token shard {} was made from it)", o.corpus,
           text.string(), man.path(info));
    uint64_t n = 0, b = 0;
    for_each_jsonl_document(text.string(), [&](const text_corpus::Document& doc) {
      const bool take = n < taken.size() && taken[n];
      ++n, b += doc.text.size();
      if (!take) return;
      in.bytes.push_back(doc.text.size());
      if (!o.index) return;
      in.overlap.push_back(document_overlap(*o.index, doc.text));
      in.ids.push_back(doc.id(fmt::format("{}:{}", text.filename().string(), doc.line)));
    });
    if (n != sh.documents() || b != sh.header().text_bytes)
      fail(
          "{} has {} documents ({} bytes) but its token shard {} has {} documents ({} bytes): "
          "the token directory was not made from this corpus",
          text.string(), n, b, man.path(info), sh.documents(), sh.header().text_bytes);
  }
  return in;
}

// Adds each document's score to the domain's subsets: all, and when audited, clean or
// contaminated by its overlap. `fp` is the Bloom filter's false-positive rate per n-gram.
void tally_domain(DomainResult& r, const DomainDocs& in, const std::vector<DocScore>& scores,
                  const EvalOptions& o, double fp) {
  uint64_t checked = 0;
  double overlap_sum = 0;
  for (uint64_t d = 0; d < in.docs.count(); ++d) {
    const uint64_t b = r.per_document_bytes ? in.bytes[d] : 0;
    r.all.add(scores[d], in.docs.size(d), b);
    if (!r.audited) continue;
    const Overlap& ov = in.overlap[d];
    const bool contaminated = is_contaminated(ov, o.threshold);
    (contaminated ? r.contaminated : r.clean).add(scores[d], in.docs.size(d), b);
    r.documents.push_back({in.ids[d], ov, contaminated});
    if (ov.ngrams == 0) {
      ++r.unchecked;
    } else {
      ++checked;
      overlap_sum += ov.fraction();
      r.expected_false_positives += -std::expm1(double(ov.ngrams) * std::log1p(-fp));
    }
  }
  if (!r.per_document_bytes) r.all.bytes = in.header_bytes;
  r.mean_overlap = checked ? overlap_sum / double(checked) : 0.0;
}

}  // namespace

EvalReport evaluate_domains(Model<float>& m, const EvalOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& cfg = m.config();
  const TokenManifest man = TokenManifest::load(o.token_dir);
  check_eval_inputs(cfg, man, o);

  EvalReport rep;
  rep.seq_len = cfg.seq_len;
  rep.stride = o.stride > 0 ? o.stride : std::max<int64_t>(1, cfg.seq_len / 2);
  MARIN_CHECK(rep.stride <= cfg.seq_len, "--stride {} is larger than seq_len {}", rep.stride,
              cfg.seq_len);
  rep.audited = o.index != nullptr;
  const double fp = o.index ? o.index->bloom.fp_rate() : 0.0;
  if (o.index) {
    rep.audit = o.index->to_json();
    rep.audit["threshold"] = o.threshold;
  }

  for (const std::string& domain : domains_to_evaluate(man, o)) {
    DomainResult r;
    r.domain = domain;
    r.audited = rep.audited;
    r.per_document_bytes = !o.corpus.empty();
    const DomainDocs in = load_domain_docs(man, o, domain);
    const DocTokens& docs = in.docs;
    uint64_t predictions = 0;
    for (uint64_t d = 0; d < docs.count(); ++d) predictions += docs.size(d) ? docs.size(d) - 1 : 0;
    if (predictions == 0) {
      const std::string why = fmt::format(
          "domain '{}' has no documents to score in its {} split of {} ({} documents, "
          "{} predictions)",
          domain, o.split, o.token_dir, docs.count(), predictions);
      if (!o.skip_empty) fail("{}; leave it out of the domains or skip empty domains", why);
      fmt::print(stderr, "marin: warning: {}: skipped\n", why);
      rep.skipped.push_back(domain);
      continue;
    }

    Progress bar(o.progress ? predictions : 0, "eval " + domain, "tok");
    const auto scores = score_documents(
        m, docs, rep.stride,
        [&](uint64_t k) {
          if (o.progress) bar.add(k);
        },
        o.group);
    bar.finish();

    tally_domain(r, in, scores, o, fp);
    rep.predictions += r.all.predictions;
    rep.domains.push_back(std::move(r));
  }
  MARIN_CHECK(!rep.domains.empty(), "no evaluation domain left to score in {}", o.token_dir);
  rep.macro = macro_of(rep.domains, &DomainResult::all);
  if (rep.audited) {
    rep.macro_clean = macro_of(rep.domains, &DomainResult::clean);
    rep.macro_contaminated = macro_of(rep.domains, &DomainResult::contaminated);
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace marin::eval
