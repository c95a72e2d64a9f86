// Scoring harness tasks: requests, packed forward passes, metrics with standard errors, the
// audit split and the harness's results layout. See task_scorer.hpp and docs/evaluation.md.
#include "eval/tasks/task_scorer.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>

#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/rng.hpp"
#include "eval/domain_eval.hpp"
#include "eval/row_packer.hpp"
#include "eval/tasks/generation.hpp"
#include "model/decode_cache.hpp"
#include "parallel/comm.hpp"

namespace marin::eval {
using json = nlohmann::json;

namespace {

std::vector<int32_t> encode(const Tokenizer& tok, std::string_view s) {
  const std::vector<uint32_t> ids = tok.encode(s);
  return std::vector<int32_t>(ids.begin(), ids.end());
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Python's len(re.split(r"\s+", s)): one more than the number of whitespace runs.
uint64_t harness_words(std::string_view s) {
  uint64_t n = 1;
  for (size_t i = 0; i < s.size();) {
    if (is_space(s[i])) {
      ++n;
      while (i < s.size() && is_space(s[i])) ++i;
    } else {
      ++i;
    }
  }
  return n;
}

double mean(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v;
  return x.empty() ? 0.0 : s / double(x.size());
}

// The harness's sample_stddev (n − 1 in the denominator).
std::optional<double> sample_stddev(const std::vector<double>& x) {
  if (x.size() < 2) return std::nullopt;
  const double mu = mean(x);
  double s = 0;
  for (double v : x) s += (v - mu) * (v - mu);
  return std::sqrt(s / double(x.size() - 1));
}

// mean_stderr: sample standard deviation / √n.
std::optional<double> mean_stderr(const std::vector<double>& x) {
  const auto sd = sample_stddev(x);
  if (!sd) return std::nullopt;
  return *sd / std::sqrt(double(x.size()));
}

// bootstrap_stderr: the sample standard deviation of f over `iters` resamples with replacement.
template <class F>
std::optional<double> bootstrap_stderr(const std::vector<double>& x, F f, uint64_t iters,
                                       uint64_t seed) {
  if (x.size() < 2 || iters < 2) return std::nullopt;
  Rng rng(seed);
  std::vector<double> stats(iters), sample(x.size());
  for (uint64_t b = 0; b < iters; ++b) {
    for (double& v : sample) v = x[rng.next_u64() % x.size()];
    stats[b] = f(sample);
  }
  return sample_stddev(stats);
}

template <class V>
size_t argmax(const V& v) {  // numpy's: the first maximum
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

}  // namespace

int32_t prefix_token(const Tokenizer& tok) {
  if (!tok.template_prefix().empty()) return int32_t(tok.template_prefix().back());
  if (auto e = tok.eos()) return int32_t(*e);
  if (auto b = tok.bos()) return int32_t(*b);
  fail("tasks: the tokenizer has neither EOS nor BOS: no prefix token for an empty context");
}

MetricValue mean_metric(const std::vector<double>& x) {
  return {mean(x), mean_stderr(x)};
}

uint64_t char_length(std::string_view s) {
  uint64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

LLRequest continuation_request(const Tokenizer& tok, std::string_view context,
                               std::string_view continuation, int64_t seq_len, int32_t prefix) {
  std::string ctx(context), cont(continuation);
  // The harness's _encode_pair: trailing whitespace of the context goes to the continuation.
  size_t keep = ctx.size();
  while (keep > 0 && is_space(ctx[keep - 1])) --keep;
  if (keep < ctx.size()) {
    cont = ctx.substr(keep) + cont;
    ctx.resize(keep);
  }
  std::vector<int32_t> whole, c;
  if (ctx.empty()) {
    whole = {prefix};
    c = encode(tok, cont);
    whole.insert(whole.end(), c.begin(), c.end());
  } else {
    // A tokenizer whose template starts a document (Llama's and Gemma's BOS) starts the context
    // with it too, as the model saw its training documents (the harness's add_bos_token).
    whole.assign(tok.template_prefix().begin(), tok.template_prefix().end());
    const std::vector<int32_t> both = encode(tok, ctx + cont);
    whole.insert(whole.end(), both.begin(), both.end());
    const size_t nctx = tok.template_prefix().size() + encode(tok, ctx).size();
    c.assign(whole.begin() + int64_t(std::min(nctx, whole.size())), whole.end());
  }
  MARIN_CHECK(!c.empty(), "tasks: the continuation {:?} has no tokens after its context",
              std::string(continuation));
  LLRequest r;
  const size_t keep_tokens = std::min(whole.size(), size_t(seq_len) + 1);
  r.seq.assign(whole.end() - int64_t(keep_tokens), whole.end());
  // A continuation longer than seq_len (the harness cannot score one): its last seq_len tokens
  // are scored, reading the ones before; counted as cut.
  r.n_score = std::min<int64_t>(int64_t(c.size()), seq_len);
  r.cut = int64_t(c.size()) > seq_len;
  return r;
}

std::vector<LLRequest> rolling_requests(const std::vector<int32_t>& t, int32_t prefix,
                                        int64_t seq_len) {
  std::vector<LLRequest> out;
  const size_t n = t.size(), S = size_t(seq_len);
  if (n == 0) return out;
  const size_t first = std::min(S, n);
  LLRequest r;
  r.seq.push_back(prefix);
  r.seq.insert(r.seq.end(), t.begin(), t.begin() + int64_t(first));
  r.n_score = int64_t(first);
  out.push_back(std::move(r));
  for (size_t predicted = first; predicted < n;) {
    const size_t len = std::min(n - predicted, S), end = predicted + len;
    LLRequest w;
    w.seq.assign(t.begin() + int64_t(end - S - 1), t.begin() + int64_t(end));
    w.n_score = int64_t(len);
    out.push_back(std::move(w));
    predicted += len;
  }
  return out;
}

std::vector<LLResult> score_requests(Model<float>& m, const std::vector<LLRequest>& reqs,
                                     const std::vector<size_t>& item_begin, parallel::Comm* group,
                                     const ItemsDone& items_done) {
  const int ranks = group ? group->size() : 1, rank = group ? group->rank() : 0;
  int64_t forwards = 0;  // the packing is the same on every rank; forward k runs on rank k % N
  const int64_t S = m.config().seq_len, V = m.config().vocab_size;
  const int B = m.max_batch();
  std::vector<LLResult> out(reqs.size());
  bool converted = false;  // the weights' bf16 copy: made by the first forward, then reused
  RowPacker packer(B, S, [&](Batch batch, const int64_t* owner) {
    if (forwards++ % ranks != rank) return;
    batch.same_weights = std::exchange(converted, true);
    batch.evaluation = true;
    m.forward(batch);
    const float* ce = m.token_ce();
    const float* logits = m.logits();
    for (size_t i = 0; i < size_t(batch.B) * size_t(S); ++i) {
      if (owner[i] < 0) continue;
      LLResult& r = out[size_t(owner[i])];
      r.ll -= double(ce[i]);
      const float* z = logits + i * size_t(V);
      if (r.greedy && int32_t(std::max_element(z, z + V) - z) != batch.labels[i]) r.greedy = false;
    }
  });
  auto len_of = [&](size_t q) { return int64_t(reqs[q].seq.size()) - 1; };
  std::vector<int64_t> lens;
  for (size_t k = 0; k < item_begin.size(); ++k) {
    // An item's requests go into one batch (flushed first when they would not fit).
    const size_t a = item_begin[k], b = k + 1 < item_begin.size() ? item_begin[k + 1] : reqs.size();
    lens.clear();
    for (size_t q = a; q < b; ++q) lens.push_back(len_of(q));
    if (!packer.fits(lens)) packer.flush();
    for (size_t q = a; q < b; ++q) {
      const LLRequest& r = reqs[q];
      const int64_t L = len_of(q);
      MARIN_CHECK(L >= 1 && L <= S && r.n_score >= 1 && r.n_score <= L,
                  "tasks: internal: request of {} tokens scoring {} (seq_len {})", r.seq.size(),
                  r.n_score, S);
      packer.add(r.seq.data(), L, L - r.n_score, L, int64_t(q));
    }
    if (items_done) items_done(1);  // packed: scored by this forward or the one it joins
  }
  packer.flush();
  if (ranks > 1) {
    // Every request was scored by exactly one rank (the others hold ll = 0, greedy = true), so
    // the sum is that rank's value bit for bit, and the minimum its greedy flag.
    std::vector<double> ll(out.size());
    std::vector<int32_t> greedy(out.size());
    for (size_t q = 0; q < out.size(); ++q) ll[q] = out[q].ll, greedy[q] = out[q].greedy;
    group->allreduce(ll.data(), int64_t(ll.size()), parallel::Op::Sum);
    group->allreduce(greedy.data(), int64_t(greedy.size()), parallel::Op::Min);
    for (size_t q = 0; q < out.size(); ++q) out[q] = {ll[q], greedy[q] != 0};
  }
  return out;
}

std::vector<LLResult> score_shared_context(Model<float>& m, const std::vector<LLRequest>& reqs,
                                           const std::vector<size_t>& item_begin,
                                           parallel::Comm* group, const ItemsDone& items_done) {
  const int ranks = group ? group->size() : 1, rank = group ? group->rank() : 0;
  const int64_t V = m.config().vocab_size;
  std::vector<LLResult> out(reqs.size());
  std::vector<LLRequest> rest;  // the requests of items whose choices do not share a context
  std::vector<size_t> rest_begin, rest_index;
  std::vector<char> decoded(reqs.size(), 0);
  // log p(token) and whether it is the argmax (the first maximum), from one position's logits.
  auto score = [&](const float* z, int32_t token, LLResult& r) {
    const size_t best = size_t(std::max_element(z, z + V) - z);
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(z[v]) - double(z[best]));
    r.ll += double(z[token]) - double(z[best]) - std::log(sum);
    if (int32_t(best) != token) r.greedy = false;
  };
  std::unique_ptr<DecodeCache<float>> shared, mine;
  for (size_t k = 0, mine_items = 0; k < item_begin.size(); ++k) {
    const size_t a = item_begin[k], b = k + 1 < item_begin.size() ? item_begin[k + 1] : reqs.size();
    // The context part of a request: every token before the last n_score of its sequence (its
    // last token is the input whose logits predict the first scored token).
    auto ctx_len = [&](size_t q) { return reqs[q].seq.size() - size_t(reqs[q].n_score); };
    bool same = true;
    for (size_t q = a + 1; q < b && same; ++q)
      same = ctx_len(q) == ctx_len(a) &&
             std::equal(reqs[q].seq.begin(), reqs[q].seq.begin() + int64_t(ctx_len(q)),
                        reqs[a].seq.begin());
    if (!same || b - a < 2) {
      rest_begin.push_back(rest.size());
      for (size_t q = a; q < b; ++q) rest.push_back(reqs[q]), rest_index.push_back(q);
      continue;
    }
    for (size_t q = a; q < b; ++q) decoded[q] = 1;
    if (items_done) items_done(1);
    if (mine_items++ % size_t(ranks) != size_t(rank)) continue;  // another rank's item
    if (!shared) shared = std::make_unique<DecodeCache<float>>(m.config());
    shared->reset();
    const float* z = nullptr;
    for (size_t j = 0; j < ctx_len(a); ++j) z = m.decode(reqs[a].seq[j], *shared);
    const std::vector<float> first(z, z + V);  // the logits after the context, for every choice
    for (size_t q = a; q < b; ++q) {
      const LLRequest& r = reqs[q];
      if (!mine) mine = std::make_unique<DecodeCache<float>>(m.config());
      *mine = *shared;
      const float* zz = first.data();
      for (size_t j = ctx_len(q); j < r.seq.size(); ++j) {
        score(zz, r.seq[j], out[q]);
        if (j + 1 < r.seq.size()) zz = m.decode(r.seq[j], *mine);
      }
    }
  }
  if (ranks > 1) {  // each decoded item was scored by one rank; the others hold ll 0, greedy
    std::vector<double> ll(out.size());
    std::vector<int32_t> greedy(out.size());
    for (size_t q = 0; q < out.size(); ++q) ll[q] = out[q].ll, greedy[q] = out[q].greedy;
    group->allreduce(ll.data(), int64_t(ll.size()), parallel::Op::Sum);
    group->allreduce(greedy.data(), int64_t(greedy.size()), parallel::Op::Min);
    for (size_t q = 0; q < out.size(); ++q)
      if (decoded[q]) out[q] = {ll[q], greedy[q] != 0};
  }
  const std::vector<LLResult> packed = score_requests(m, rest, rest_begin, group, items_done);
  for (size_t i = 0; i < rest.size(); ++i) out[rest_index[i]] = packed[i];
  return out;
}

std::map<std::string, MetricValue> task_metrics(const TaskItems& t, const ItemScores& s,
                                                const std::vector<size_t>& which,
                                                const TaskOptions& o) {
  std::map<std::string, MetricValue> out;
  if (which.empty()) return out;
  if (t.type == OutputType::MultipleChoice) {
    std::vector<double> acc, acc_norm;
    for (size_t i : which) {
      const TaskItem& it = t.items[i];
      const auto& ll = s.ll[i];
      std::vector<double> norm(ll.size());
      for (size_t c = 0; c < ll.size(); ++c) norm[c] = ll[c] / double(char_length(it.choices[c]));
      auto hit = [&](size_t p) {
        return std::find(it.gold.begin(), it.gold.end(), int(p)) != it.gold.end() ? 1.0 : 0.0;
      };
      acc.push_back(hit(argmax(ll)));
      acc_norm.push_back(hit(argmax(norm)));
    }
    out["acc"] = {mean(acc), mean_stderr(acc)};
    out["acc_norm"] = {mean(acc_norm), mean_stderr(acc_norm)};
  } else if (t.type == OutputType::Loglikelihood) {
    std::vector<double> ll, greedy;
    for (size_t i : which) ll.push_back(s.ll[i][0]), greedy.push_back(s.greedy[i][0] ? 1 : 0);
    auto ppl = [](const std::vector<double>& x) { return std::exp(-mean(x)); };
    out["perplexity"] = {ppl(ll), bootstrap_stderr(ll, ppl, o.bootstrap_iters, o.bootstrap_seed)};
    out["acc"] = {mean(greedy), mean_stderr(greedy)};
  } else {
    double ll = 0, words = 0, bytes = 0;
    for (size_t i : which)
      ll += s.ll[i][0], words += double(s.words[i]), bytes += double(s.bytes[i]);
    out["word_perplexity"] = {std::exp(-ll / words), std::nullopt};
    out["byte_perplexity"] = {std::exp(-ll / bytes), std::nullopt};
    out["bits_per_byte"] = {-ll / bytes / std::log(2.0), std::nullopt};
  }
  for (auto it = out.begin(); it != out.end();)  // only the task's metric_list
    it = std::find(t.metrics.begin(), t.metrics.end(), it->first) == t.metrics.end()
             ? out.erase(it)
             : std::next(it);
  return out;
}

namespace {
// A task with its own process_results: the harness's per-document `results` (a list of
// (loglikelihood, is_greedy) per request; the summed loglikelihood for loglikelihood_rolling) go
// to the task's Python, which returns each document's metric dict and each metric's aggregate.
// Standard errors as the harness's stderr_for_metric: mean_stderr for "mean", a bootstrap for
// "median" and "perplexity", none ("N/A") for the other aggregations.
std::map<std::string, MetricValue> own_task_metrics(const TaskItems& t, const ItemScores& s,
                                                    const std::vector<size_t>& which,
                                                    const TaskOptions& o, json* per_item) {
  std::map<std::string, MetricValue> out;
  if (which.empty()) return out;
  json items = json::array();
  for (size_t i : which) {
    json res = json::array();
    for (size_t q = 0; q < s.ll[i].size(); ++q)
      res.push_back(t.type == OutputType::LoglikelihoodRolling
                        ? json(s.ll[i][q])
                        : json::array({s.ll[i][q], bool(s.greedy[i][q])}));
    items.push_back({{"doc_id", t.items[i].doc_id}, {"doc", t.items[i].doc}, {"results", res}});
  }
  const json got = run_task_results(t, {{"items", items}});
  if (per_item) *per_item = got["per_item"];
  const json& aggs = t.header["aggregations"];
  for (const std::string& m : t.metrics) {
    MetricValue v{got["values"].at(m).get<double>(), std::nullopt};
    std::vector<double> x;
    for (const json& p : got["per_item"])
      if (p[m].is_number()) x.push_back(p[m].get<double>());
    const std::string agg = aggs.value(m, std::string());
    if (x.size() == which.size()) {
      if (agg == "mean") v.stderr_ = mean_stderr(x);
      if (agg == "perplexity")
        v.stderr_ = bootstrap_stderr(
            x, [](const std::vector<double>& y) { return std::exp(-mean(y)); }, o.bootstrap_iters,
            o.bootstrap_seed);
      if (agg == "median")
        v.stderr_ = bootstrap_stderr(
            x, [](const std::vector<double>& y) { return y[y.size() / 2]; }, o.bootstrap_iters,
            o.bootstrap_seed);
    }
    out[m] = v;
  }
  return out;
}

// Multi-input (winogrande): the one continuation, after target_delimiter, scored after each
// context (the harness's construct_requests: [(context, f"{target_delimiter}{cont}") for
// context in contexts]). acc and acc_norm then follow multiple_choice, with the item's choices
// (the contexts without the few-shot prefix) as acc_norm's lengths, as the harness divides by
// len(doc_to_choice).
void add_multi_input_requests(const Tokenizer& tok, const TaskItems& t, const TaskItem& it,
                              int64_t S, int32_t prefix, std::vector<LLRequest>& reqs) {
  for (const std::string& c : it.contexts)
    reqs.push_back(continuation_request(tok, c, t.target_delimiter + it.continuation, S, prefix));
}
}  // namespace

void add_audit_fields(nlohmann::json& sample, const TaskResult& r, size_t i) {
  if (!r.audited) return;
  sample["ngrams"] = r.items[i].overlap.ngrams;
  sample["overlap"] = r.items[i].overlap.fraction();
  sample["contaminated"] = r.items[i].contaminated;
}

void split_metrics_by_audit(
    const TaskItems& t, const TaskOptions& o, TaskResult& r,
    const std::function<std::map<std::string, MetricValue>(const std::vector<size_t>&)>&
        metrics_of) {
  std::vector<size_t> all(r.effective), clean, contam;
  for (size_t i = 0; i < r.effective; ++i) all[i] = i;
  r.all = metrics_of(all);
  if (!o.index) return;
  r.audited = true;
  for (size_t i = 0; i < r.effective; ++i) {
    ItemAudit a{t.items[i].doc_id, t.items[i].id,
                document_overlap(*o.index, t.items[i].audit_text)};
    a.contaminated = is_contaminated(a.overlap, o.threshold);
    (a.contaminated ? contam : clean).push_back(i);
    if (a.overlap.ngrams == 0) ++r.unchecked;
    r.items.push_back(std::move(a));
  }
  r.n_clean = clean.size();
  r.n_contaminated = contam.size();
  r.clean = metrics_of(clean);
  r.contaminated = metrics_of(contam);
}

TaskResult score_task(Model<float>& m, const Tokenizer& tok, const TaskItems& t,
                      const TaskOptions& o) {
  if (t.type == OutputType::GenerateUntil) return score_generation_task(m, tok, t, o);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t S = m.config().seq_len;
  MARIN_CHECK(tok.vocab_size() <= uint32_t(m.config().vocab_size),
              "tasks: the tokenizer has {} ids but the model's vocabulary is {}", tok.vocab_size(),
              m.config().vocab_size);
  const int32_t prefix = prefix_token(tok);
  MARIN_CHECK(t.type != OutputType::GenerateUntil,
              "{}: {}: output_type generate_until is not scored by this build (no generation)",
              t.file, t.name);
  TaskResult r;
  r.task = t.name;
  r.version = t.version;
  r.config = t.header.is_object() ? t.header.value("config", json::object()) : json::object();
  r.num_fewshot = t.num_fewshot;
  r.metrics = t.metrics;
  r.original = t.items.size();
  r.effective = o.limit ? std::min<uint64_t>(o.limit, t.items.size()) : t.items.size();
  r.items_hash = t.items_hash(r.effective);

  std::vector<LLRequest> reqs;
  std::vector<size_t> begin, first_req;
  ItemScores s;
  s.words.assign(r.effective, 0);
  s.bytes.assign(r.effective, 0);
  for (size_t i = 0; i < r.effective; ++i) {
    const TaskItem& it = t.items[i];
    begin.push_back(reqs.size());
    if (t.multi_input) {
      add_multi_input_requests(tok, t, it, S, prefix, reqs);
    } else if (t.type == OutputType::MultipleChoice) {
      for (const std::string& c : it.choices)
        reqs.push_back(continuation_request(tok, it.context, t.target_delimiter + c, S, prefix));
    } else if (t.type == OutputType::Loglikelihood) {
      // The harness's loglikelihood request is (context, doc_to_target) as it stands: unlike a
      // multiple-choice continuation, no target_delimiter goes between them (an extra " " here
      // was one extra scored token per item, which inflated perplexity).
      reqs.push_back(continuation_request(tok, it.context, it.target, S, prefix));
    } else {
      for (auto& w : rolling_requests(encode(tok, it.target), prefix, S))
        reqs.push_back(std::move(w));
      s.words[i] = harness_words(it.target);
      s.bytes[i] = it.target.size();
    }
  }
  for (const auto& q : reqs) r.tokens += q.seq.size() - 1, r.cut += q.cut;
  r.requests = reqs.size();
  // A multi-input item's requests have different contexts: nothing to share.
  Progress bar(o.progress ? r.effective : 0, "task " + t.name);
  const ItemsDone done = [&](uint64_t n) { bar.add(n); };
  const std::vector<LLResult> res =
      o.shared_context && t.type == OutputType::MultipleChoice && !t.multi_input
          ? score_shared_context(m, reqs, begin, o.group, done)
          : score_requests(m, reqs, begin, o.group, done);
  bar.finish();
  s.ll.resize(r.effective);
  s.greedy.resize(r.effective);
  for (size_t i = 0; i < r.effective; ++i) {
    const size_t a = begin[i], b = i + 1 < begin.size() ? begin[i + 1] : reqs.size();
    if (t.type == OutputType::LoglikelihoodRolling) {
      double ll = 0;
      for (size_t q = a; q < b; ++q) ll += res[q].ll;
      s.ll[i] = {ll};
      s.greedy[i] = {false};
    } else {
      for (size_t q = a; q < b; ++q)
        s.ll[i].push_back(res[q].ll), s.greedy[i].push_back(res[q].greedy);
    }
  }

  json own_per_item;  // a task with process_results: its per-document dicts (all items)
  split_metrics_by_audit(t, o, r, [&](const std::vector<size_t>& which) {
    if (t.task_code)
      return own_task_metrics(t, s, which, o,
                              which.size() == r.effective ? &own_per_item : nullptr);
    return task_metrics(t, s, which, o);
  });
  if (o.log_samples) {
    for (size_t i = 0; i < r.effective; ++i) {
      const TaskItem& it = t.items[i];
      json j = {{"doc_id", it.doc_id}, {"id", it.id}, {"context", it.context}};
      if (t.type == OutputType::MultipleChoice) {
        j["choices"] = it.choices;
        j["target"] = it.gold.size() == 1 ? json(it.gold[0]) : json(it.gold);
        if (t.multi_input) j["contexts"] = it.contexts, j["continuation"] = it.continuation;
      } else {
        j["target"] = it.target;
      }
      j["loglikelihoods"] = s.ll[i];
      if (t.type != OutputType::LoglikelihoodRolling) j["is_greedy"] = s.greedy[i];
      json per = json::object();
      if (t.task_code)
        per = own_per_item.at(i);
      else
        for (const auto& [k, v] : task_metrics(t, s, {i}, o)) per[k] = v.value;
      j["metrics"] = per;
      add_audit_fields(j, r, i);
      r.samples.push_back(std::move(j));
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

TaskResults score_tasks(Model<float>& m, const Tokenizer& tok, const std::vector<TaskItems>& tasks,
                        const TaskOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  TaskResults out;
  for (const TaskItems& t : tasks) {
    for (const auto& prev : out.tasks)
      MARIN_CHECK(prev.task != t.name, "tasks: task '{}' is given twice ({})", t.name, t.file);
    out.tasks.push_back(score_task(m, tok, t, o));
    if (o.progress)
      fmt::print(stderr, "marin: task {}: {} items in {:.1f} s\n", t.name,
                 out.tasks.back().effective, out.tasks.back().seconds);
  }
  if (o.index) {
    out.audited = true;
    out.audit = o.index->to_json();
    out.audit["threshold"] = o.threshold;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

namespace {

bool known_metric(const std::string& m) {
  for (const char* k : {"acc", "acc_norm", "exact_match", "perplexity", "word_perplexity",
                        "byte_perplexity", "bits_per_byte"})
    if (m == k) return true;
  return false;
}

bool higher_is_better(const std::string& m) {
  return m == "acc" || m == "acc_norm" || m == "exact_match";
}

// A key "metric,filter" (generate_until) keeps its filter; the others are under "none".
std::string metric_name(const std::string& k) {
  return k.substr(0, k.find(','));
}
std::string filter_name(const std::string& k) {
  const size_t c = k.find(',');
  return c == std::string::npos ? "none" : k.substr(c + 1);
}

json metrics_json(const std::map<std::string, MetricValue>& ms) {
  json j = json::object();
  for (const auto& [k, v] : ms) {
    j[metric_name(k) + "," + filter_name(k)] = v.value;
    j[metric_name(k) + "_stderr," + filter_name(k)] = v.stderr_ ? json(*v.stderr_) : json("N/A");
  }
  return j;
}

}  // namespace

namespace {
// Python's str() of a float (repr: shortest round trip, always with a '.' or an exponent).
std::string py_float(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", x);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}
}  // namespace

namespace {

// A generate_until item's lines, one per filter as the harness writes them: the context and the
// generation kwargs as its arguments, the R responses, that filter's response and metric.
std::vector<json> generation_samples(const TaskItems& t, const TaskItem& it, const json& smp) {
  const GenerationConfig& g = *t.generation;
  const json kwargs = {
      {"until", g.kwargs.until}, {"max_gen_toks", g.kwargs.max_gen_toks}, {"do_sample", false}};
  std::vector<json> out;
  for (const FilterPipeline& f : g.filters) {
    const std::string metric = "exact_match," + f.name;
    json e = {{"doc_id", it.doc_id},
              {"doc", it.doc.is_null() ? json::object() : it.doc},
              {"target", it.targets.size() == 1 ? json(it.targets[0]) : json(it.targets)},
              {"arguments", {{"gen_args_0", {{"arg_0", it.context}, {"arg_1", kwargs}}}}},
              {"resps", smp.at("resps")},
              {"filtered_resps", json::array({smp.at("filtered_resps").at(f.name)})},
              {"filter", f.name},
              {"metrics", json::array({"exact_match"})},
              {"exact_match", smp.at("metrics").at(metric)}};
    for (const auto& [k, v] : it.hashes.items()) e[k] = v;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

std::vector<json> harness_samples(const TaskItems& t, const TaskResult& r) {
  std::vector<json> out;
  for (size_t i = 0; i < r.samples.size() && i < t.items.size(); ++i) {
    const TaskItem& it = t.items[i];
    const json& smp = r.samples[i];
    if (t.type == OutputType::GenerateUntil) {
      for (json& e : generation_samples(t, it, smp)) out.push_back(std::move(e));
      continue;
    }
    std::vector<std::vector<std::string>> args;
    if (t.multi_input) {
      for (const auto& c : it.contexts) args.push_back({c, t.target_delimiter + it.continuation});
    } else if (t.type == OutputType::MultipleChoice) {
      for (const auto& c : it.choices) args.push_back({it.context, t.target_delimiter + c});
    } else if (t.type == OutputType::Loglikelihood) {
      args.push_back({it.context, it.target});
    } else {
      args.push_back({it.target});
    }
    json arguments = json::object(), resps = json::array(), filtered = json::array();
    for (size_t a = 0; a < args.size(); ++a) {
      json g = json::object();
      for (size_t k = 0; k < args[a].size(); ++k) g[fmt::format("arg_{}", k)] = args[a][k];
      arguments[fmt::format("gen_args_{}", a)] = g;
    }
    const json& lls = smp["loglikelihoods"];
    for (size_t q = 0; q < lls.size(); ++q) {
      const std::string ll = py_float(lls[q].get<double>());
      json one = t.type == OutputType::LoglikelihoodRolling
                     ? json(ll)
                     : json::array({ll, smp["is_greedy"][q].get<bool>() ? "True" : "False"});
      resps.push_back(json::array({one}));
      filtered.push_back(one);
    }
    json target = t.type == OutputType::MultipleChoice
                      ? json(t.multi_input ? it.continuation : std::to_string(it.gold[0]))
                      : json(it.target);
    json e = {{"doc_id", it.doc_id}, {"doc", it.doc.is_null() ? json::object() : it.doc},
              {"target", target},    {"arguments", arguments},
              {"resps", resps},      {"filtered_resps", filtered},
              {"filter", "none"},    {"metrics", json::array()}};
    for (const auto& [k, v] : smp["metrics"].items()) e["metrics"].push_back(k), e[k] = v;
    // The harness's per-document perplexity is the log-likelihood itself (its aggregation
    // takes exp(−mean)).
    if (t.type == OutputType::Loglikelihood && e.contains("perplexity")) e["perplexity"] = lls[0];
    for (const auto& [k, v] : it.hashes.items()) e[k] = v;
    out.push_back(std::move(e));
  }
  return out;
}

json TaskResults::to_json(const json& run_config) const {
  json results = json::object(), configs = json::object(), versions = json::object(),
       nshot = json::object(), hib = json::object(), nsamples = json::object(),
       subtasks = json::object(), marin = json::object(), samples = json::object();
  bool any_samples = false;
  for (const TaskResult& t : tasks) {
    json r = metrics_json(t.all);
    // The harness's per-task fields: alias (task_alias when the YAML gives one), name,
    // sample_len (the documents scored).
    r["alias"] = t.config.is_object() && t.config.contains("task_alias") &&
                         t.config["task_alias"].is_string()
                     ? t.config["task_alias"]
                     : json(t.task);
    r["name"] = t.task;
    r["sample_len"] = t.effective;
    results[t.task] = r;
    json c = t.config;
    c["num_fewshot"] = t.num_fewshot;
    configs[t.task] = c;
    versions[t.task] = t.version;
    nshot[t.task] = t.num_fewshot;
    json h = json::object();
    // The registry's value for marin's metrics; a task's own metric without higher_is_better is
    // null (the harness's is_higher_better of an unregistered name).
    for (const auto& m : t.metrics)
      h[metric_name(m)] =
          known_metric(metric_name(m)) ? json(higher_is_better(metric_name(m))) : json(nullptr);
    // metric_list's own higher_is_better wins (a task with process_results names its metrics).
    if (t.config.is_object() && t.config.contains("metric_list") &&
        t.config["metric_list"].is_array())
      for (const json& e : t.config["metric_list"])
        if (e.is_object() && e.contains("metric") && e["metric"].is_string() &&
            h.contains(e["metric"].get<std::string>()) && e.contains("higher_is_better") &&
            e["higher_is_better"].is_boolean())
          h[e["metric"].get<std::string>()] = e["higher_is_better"];
    hib[t.task] = h;
    nsamples[t.task] = {{"original", t.original}, {"effective", t.effective}};
    subtasks[t.task] = json::array();
    json mj = {{"items_hash", t.items_hash}, {"cut_continuations", t.cut},
               {"requests", t.requests},     {"tokens", t.tokens},
               {"seconds", t.seconds},       {"items_per_s", t.items_per_s()}};
    if (t.audited) {
      json cl = metrics_json(t.clean), co = metrics_json(t.contaminated);
      cl["n"] = t.n_clean;
      co["n"] = t.n_contaminated;
      mj["clean"] = cl;
      mj["contaminated"] = co;
      mj["unchecked_short_items"] = t.unchecked;
      json items = json::array();
      for (const ItemAudit& a : t.items)
        items.push_back({{"doc_id", a.doc_id},
                         {"id", a.id},
                         {"ngrams", a.overlap.ngrams},
                         {"found", a.overlap.found},
                         {"overlap", a.overlap.fraction()},
                         {"contaminated", a.contaminated}});
      mj["items"] = items;
    }
    marin[t.task] = mj;
    if (!t.samples.empty()) samples[t.task] = t.samples, any_samples = true;
  }
  json j = {{"results", results},
            {"group_subtasks", subtasks},
            {"configs", configs},
            {"versions", versions},
            {"n-shot", nshot},
            {"higher_is_better", hib},
            {"n-samples", nsamples},
            {"config", run_config},
            {"date", double(std::time(nullptr))},
            {"total_evaluation_time_seconds", fmt::format("{:.3f}", seconds)},
            {"marin", {{"format", "marin-tasks-results/1"}, {"tasks", marin}}}};
  if (audited) j["marin"]["audit"] = audit;
  if (any_samples) j["samples"] = samples;
  add_group_results(j, groups);
  return j;
}

json TaskResults::summary() const {
  auto subset = [](const TaskResult& t, const std::map<std::string, MetricValue>& ms, uint64_t n) {
    json j = {{"n", n}};
    for (const std::string& m : t.metrics) {
      auto it = ms.find(m);
      j[m] = it == ms.end() ? json(nullptr) : json(it->second.value);
    }
    return j;
  };
  json per = json::object();
  for (const TaskResult& t : tasks) {
    json j = {{"n", t.effective}, {"items_hash", t.items_hash}};
    for (const std::string& m : t.metrics) {
      auto it = t.all.find(m);
      j[m] = it == t.all.end() ? json(nullptr) : json(it->second.value);
      j[m + "_stderr"] =
          it == t.all.end() || !it->second.stderr_ ? json(nullptr) : json(*it->second.stderr_);
    }
    if (t.audited) {
      j["clean"] = subset(t, t.clean, t.n_clean);
      j["contaminated"] = subset(t, t.contaminated, t.n_contaminated);
    }
    per[t.task] = j;
  }
  return {{"seconds", seconds}, {"audited", audited}, {"tasks", per}};
}

std::string TaskResults::table() const {
  std::string s =
      fmt::format("{:<22} {:>6} {:<16} {:>10} {:>9}", "task", "items", "metric", "value", "stderr");
  if (audited)
    s += fmt::format(" | {:>6} {:>10} | {:>6} {:>10}", "clean", "value", "contam", "value");
  s += "\n";
  auto val = [](const std::map<std::string, MetricValue>& ms, const std::string& k) {
    auto it = ms.find(k);
    return it == ms.end() ? std::string("-") : fmt::format("{:.4f}", it->second.value);
  };
  for (const TaskResult& t : tasks) {
    for (const std::string& m : t.metrics) {
      const auto& v = t.all.at(m);
      s += fmt::format("{:<22} {:>6} {:<16} {:>10.4f} {:>9}", t.task, t.effective, m, v.value,
                       v.stderr_ ? fmt::format("{:.4f}", *v.stderr_) : std::string("N/A"));
      if (audited)
        s += fmt::format(" | {:>6} {:>10} | {:>6} {:>10}", t.n_clean, val(t.clean, m),
                         t.n_contaminated, val(t.contaminated, m));
      s += "\n";
    }
  }
  for (const TaskResult& t : tasks)
    s += fmt::format("{}: version {}, {}-shot, items {} (xxh64 {}), {:.1f} items/s\n", t.task,
                     t.version.is_null() ? "-" : t.version.dump(), t.num_fewshot, t.effective,
                     t.items_hash, t.items_per_s());
  if (!groups.empty()) {  // the groups' aggregates, as the results JSON has them
    const json j = to_json();
    for (const TaskGroup& g : groups) {
      const json& r = j["results"][g.name];
      if (!g.aggregates) continue;
      for (const auto& [k, v] : r.items()) {
        if (k.find(',') == std::string::npos || k.find("_stderr,") != std::string::npos) continue;
        const json& e = r[metric_name(k) + "_stderr," + filter_name(k)];
        s += fmt::format("group {}: {} {:.4f} ± {} over {} items of {} tasks\n", g.name, k,
                         v.get<double>(),
                         e.is_number() ? fmt::format("{:.4f}", e.get<double>()) : e.dump(),
                         r.value("sample_len", 0.0), g.leaves.size());
      }
    }
  }
  for (const TaskResult& t : tasks)
    if (t.cut)
      s += fmt::format(
          "{}: warning: {} continuations are longer than seq_len: only their last "
          "seq_len tokens are scored\n",
          t.task, t.cut);
  if (audited)
    s += fmt::format(
        "contaminated: {}-gram overlap > {} with the training text (items with "
        "fewer words are unchecked and counted clean)\n",
        audit.value("n", 13), audit.value("threshold", 0.0));
  return s;
}

}  // namespace marin::eval
