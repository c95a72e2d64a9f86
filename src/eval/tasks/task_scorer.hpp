#pragma once
// Scoring harness tasks with the lm-evaluation-harness's semantics (docs/evaluation.md,
// "Downstream tasks"):
//  * a continuation's tokens are encode(context + continuation) after encode(context), with the
//    context's trailing whitespace moved to the continuation; an empty context is the prefix token
//    (EOS, the document separator the model was trained with); the continuation of a
//    multiple-choice item is target_delimiter + choice, of a loglikelihood item the target as it
//    is (the harness's construct_requests);
//  * the sequence context + continuation is cut to its last seq_len + 1 tokens (left truncation;
//    a continuation longer than seq_len, which the harness cannot score, has its last seq_len
//    tokens scored and is counted in TaskResult::cut);
//    its log-likelihood is the sum of the continuation's token log-probabilities, and it is
//    greedy when every continuation token is the argmax;
//  * loglikelihood_rolling: the harness's rolling windows (first window after the prefix token,
//    each next window of seq_len inputs predicting the next tokens);
//  * multiple_choice: acc = argmax of the log-likelihoods is a gold choice; acc_norm = argmax of
//    log-likelihood / length of the choice in characters (code points);
//    loglikelihood: perplexity = exp(−mean ll), acc = mean greedy match (LAMBADA);
//    rolling: word_perplexity, byte_perplexity, bits_per_byte (weighted by words and bytes);
//  * standard errors as the harness reports them: the sample standard error of the mean for
//    acc/acc_norm, a bootstrap for perplexity, none for the weighted perplexities.
// Every request of one item is scored in the same forward pass (packed into rows with segment
// ids); the context is recomputed for each choice (one forward over the packed rows), unless
// TaskOptions::shared_context runs it once through the decoding cache (score_shared_context).
// Under MPI (TaskOptions::group) the forward passes are split over the ranks, with exactly the
// one-process result.
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/tokenizer.hpp"
#include "eval/contamination.hpp"
#include "eval/tasks/task_items.hpp"
#include "model/model.hpp"
#include "parallel/comm.hpp"

namespace marin::eval {

// One log-likelihood request: the model reads seq[0 … n−2] and the last n_score tokens of seq are
// scored (seq has at most seq_len + 1 tokens).
struct LLRequest {
  std::vector<int32_t> seq;
  int64_t n_score = 0;
  bool cut = false;  // the continuation was longer than seq_len: only its last seq_len scored
};
struct LLResult {
  double ll = 0;       // Σ log p of the scored tokens (nats)
  bool greedy = true;  // every scored token is the argmax of its logits
};

// The harness's encoding of (context, continuation), truncated on the left to seq_len + 1 tokens.
LLRequest continuation_request(const Tokenizer& tok, std::string_view context,
                               std::string_view continuation, int64_t seq_len, int32_t prefix);
// The harness's rolling windows over a text's tokens (get_rolling_token_windows, context_len 1).
std::vector<LLRequest> rolling_requests(const std::vector<int32_t>& tokens, int32_t prefix,
                                        int64_t seq_len);
// Scores requests in packed forward passes of up to max_batch rows (dropless). item_begin: the
// first request of each item, ascending; an item's requests share one forward unless they need
// more than max_batch rows. With a group of N ranks (collective: every rank passes the same
// requests) the forwards are planned identically on every rank, forward k runs on rank k % N, and
// the results are all-reduced: every rank returns exactly the one-process result. items_done(n) is
// told of n more items as they are scored (a progress display; every rank counts every item).
using ItemsDone = std::function<void(uint64_t)>;
std::vector<LLResult> score_requests(Model<float>& m, const std::vector<LLRequest>& reqs,
                                     const std::vector<size_t>& item_begin,
                                     parallel::Comm* group = nullptr,
                                     const ItemsDone& items_done = {});

// The same results through the decoding cache (Model::decode): an item whose requests share
// their context (every multiple-choice item whose sequences were not cut differently by the left
// truncation) has the context decoded once, and each choice continues from a copy of that cache;
// the other items go through score_requests. Under a group, the decoded items are split over the
// ranks (item i on rank i mod N) and all-reduced like score_requests. Equal to score_requests up
// to float rounding (the decoder's logits equal the forward's).
std::vector<LLResult> score_shared_context(Model<float>& m, const std::vector<LLRequest>& reqs,
                                           const std::vector<size_t>& item_begin,
                                           parallel::Comm* group = nullptr,
                                           const ItemsDone& items_done = {});

// The token an empty context is replaced by: the document start of the tokenizer's template
// (Llama's and Gemma's BOS) when it has one, else EOS, else BOS (the document separator).
// A non-empty context starts with the template's prefix (continuation_request, generation).
int32_t prefix_token(const Tokenizer& tok);

// Unicode code points of UTF-8 text (Python's len(str)), for acc_norm.
uint64_t char_length(std::string_view utf8);

struct TaskOptions {
  uint64_t limit = 0;                 // score the first N items (0: all), as --limit
  const NgramIndex* index = nullptr;  // training n-grams: tag every item (clean/contaminated)
  double threshold = 0;
  bool log_samples = false;  // keep per-item contexts, choices, log-likelihoods
  // multiple_choice: compute each item's shared context once through the decoding cache
  // (score_shared_context) instead of once per choice in packed forwards.
  bool shared_context = false;
  // generate_until: prompts decoded together (generate_greedy), as the harness's batch_size.
  int64_t generation_batch = 32;
  uint64_t bootstrap_iters = 100000;  // the harness's default
  uint64_t bootstrap_seed = 1234;
  bool progress = true;
  // Ranks that split the forward passes (null: this process). Collective: every rank of the group
  // scores the same tasks with the same options and gets the whole result.
  parallel::Comm* group = nullptr;
};

struct MetricValue {
  double value = 0;
  std::optional<double> stderr_;  // "N/A" in the harness's results when absent
};

// The mean of per-item scores with the harness's mean_stderr (sample sd / √n; none for n < 2).
MetricValue mean_metric(const std::vector<double>& x);

struct ItemAudit {
  uint64_t doc_id = 0;
  std::string id;
  Overlap overlap;
  bool contaminated = false;
};

struct TaskResult {
  std::string task;
  nlohmann::json version, config;
  int num_fewshot = 0;
  std::vector<std::string> metrics;
  std::string items_hash;
  uint64_t original = 0, effective = 0;  // items in the task, items scored (--limit)
  std::map<std::string, MetricValue> all, clean, contaminated;
  uint64_t n_clean = 0, n_contaminated = 0, unchecked = 0;
  bool audited = false;
  std::vector<ItemAudit> items;
  nlohmann::json samples = nlohmann::json::array();
  double seconds = 0;
  uint64_t requests = 0, tokens = 0;
  uint64_t cut = 0;  // continuations longer than seq_len (their last seq_len tokens scored)
  double items_per_s() const { return seconds > 0 ? double(effective) / seconds : 0.0; }
};

// Fills r.all, and with an audit index (o.index) r.items, the clean/contaminated split and their
// metrics: `metrics_of(items)` computes a task's metrics over a subset of its scored items. The one
// audit split of every output type (loglikelihood and generation alike).
void split_metrics_by_audit(
    const TaskItems& t, const TaskOptions& o, TaskResult& r,
    const std::function<std::map<std::string, MetricValue>(const std::vector<size_t>&)>&
        metrics_of);

// A --log-samples line's audit fields for item i (ngrams, overlap, contaminated), when the task
// was audited.
void add_audit_fields(nlohmann::json& sample, const TaskResult& r, size_t i);

struct TaskResults {
  std::vector<TaskResult> tasks;
  bool audited = false;
  nlohmann::json audit;  // the index's to_json() + threshold
  double seconds = 0;
  std::vector<TaskGroup> groups;  // from resolve_task_files: aggregated by to_json
  // The harness's results layout ("results", "configs", "versions", "n-shot",
  // "higher_is_better", "n-samples", "config") plus "marin" (items hash, clean/contaminated
  // metrics, audited item ids) and, with log_samples, "samples".
  nlohmann::json to_json(const nlohmann::json& run_config = nlohmann::json::object()) const;
  std::string table() const;
  // The compact record of a training run's metrics line and a ladder's curve points:
  // {"seconds", "audited", "tasks": {TASK: {"n", "items_hash", METRIC: value, METRIC_stderr:
  // value or null, …, "clean": {"n", METRIC: value or null, …}, "contaminated": {…}}}} (clean /
  // contaminated only when audited; a metric of an empty subset is null).
  nlohmann::json summary() const;
};

// The metrics of one task from its per-item results (exposed for the tests). ll[i]: per choice
// (multiple_choice) or one value; greedy likewise; words/bytes of the rolling texts.
struct ItemScores {
  std::vector<std::vector<double>> ll;
  std::vector<std::vector<bool>> greedy;
  std::vector<uint64_t> words, bytes;
};
std::map<std::string, MetricValue> task_metrics(const TaskItems& t, const ItemScores& s,
                                                const std::vector<size_t>& which,
                                                const TaskOptions& o);

// Scores tasks with the model as it is (transport forced dropless, restored after; overwrites
// the model's saved activations: call between training steps). The trainer's entry point.
TaskResult score_task(Model<float>& m, const Tokenizer& tok, const TaskItems& t,
                      const TaskOptions& o);
// The harness's logged samples (--log-samples: samples_<task>_<date>.jsonl, one object a line):
// doc_id, doc, target, arguments {"gen_args_i": {"arg_0": context, "arg_1": continuation}},
// resps [[[ll, is_greedy]]] and filtered_resps [[ll, is_greedy]] as Python's str() writes them,
// filter "none", metrics (names), doc_hash, prompt_hash, target_hash, and each metric's value.
// Needs r scored with TaskOptions::log_samples.
std::vector<nlohmann::json> harness_samples(const TaskItems& t, const TaskResult& r);
TaskResults score_tasks(Model<float>& m, const Tokenizer& tok, const std::vector<TaskItems>& tasks,
                        const TaskOptions& o);

}  // namespace marin::eval
