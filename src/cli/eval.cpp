// marin eval: per-domain loss and bits per byte of a checkpoint over the evaluation domains of a
// token directory, with the contamination audit whenever the training data is known
// (docs/evaluation.md).
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
#include "data/mixture.hpp"
#include "data/shards.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "eval/contamination.hpp"
#include "eval/domain_eval.hpp"
#include "eval/macro_metric.hpp"
#include "eval/tasks/task_items.hpp"
#include "eval/tasks/task_scorer.hpp"
#include "parallel/comm.hpp"
#include "train/checkpoint.hpp"

namespace marin::cli {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

struct EvalArgs {
  DtypeOption dtype;
  std::string checkpoint, tokens, corpus, json_out, tokenizer, run;
  std::vector<std::string> domains;
  int64_t stride = 0;
  uint64_t max_tokens = 0;
  int batch = 8;
  std::string train_corpus, mixture;
  bool allow_nonfinite = false;
  std::vector<std::string> train_domains;
  int ngram = 13;
  double threshold = 0;
  double fp_rate = 1e-6;
  double bloom_mb = 2048;
  bool no_audit = false, skip_empty = false, quiet = false;
  int threads = 2;
  // Downstream tasks (docs/evaluation.md, "Downstream tasks").
  std::vector<std::string> tasks;
  std::vector<std::string> task_dir;
  uint64_t limit = 0;
  int num_fewshot = -1;          // -1: the task's own
  int task_timeout = 120;        // seconds the task renderer may run (0: no limit)
  bool trust_task_code = false;  // run a task's own Python (!function)
  std::string dataset_root;      // local copies of Hub datasets
  int fewshot_seed = 1234;
  uint64_t bootstrap_iters = 100000;
  bool log_samples = false;
  bool shared_context = false;
  int64_t gen_batch = 32;
};

// The training options of the run a checkpoint belongs to: CKPT/state.json (a run checkpoint),
// else RUN/run.json for --run RUN or for CKPT = RUN/checkpoints/step-N.
std::optional<std::pair<json, std::string>> run_options(const EvalArgs& a) {
  std::vector<fs::path> candidates;
  if (!a.run.empty()) {
    candidates.push_back(fs::path(a.run) / "run.json");
  } else {
    candidates.push_back(fs::path(a.checkpoint) / "state.json");
    const fs::path parent = fs::absolute(a.checkpoint).lexically_normal().parent_path();
    if (parent.filename() == "checkpoints") candidates.push_back(parent.parent_path() / "run.json");
  }
  for (const fs::path& p : candidates) {
    if (!fs::exists(p)) continue;
    const json j = load_json(p.string());
    if (j.contains("options") && j["options"].is_object())
      return std::pair{j["options"], p.string()};
  }
  if (!a.run.empty()) fail("--run {}: no run.json with \"options\" there", a.run);
  return std::nullopt;
}

std::string existing_dir(const std::string& p) {
  return !p.empty() && fs::is_directory(p) ? p : "";
}

// The training data, in order: --train-domains, --mixture, the run's mixture (run_tokens: the
// run's token directory, "" when there is no run with a mixture). The text corpus defaults to
// --train-corpus, then the run tokens' corpus, then `eval_corpus`.
struct TrainingData {
  std::optional<eval::TrainText> text;
  std::string from, run_tokens;
};
TrainingData training_data(const EvalArgs& a, bool need_run, const std::string& eval_corpus) {
  TrainingData t;
  const auto run = need_run ? run_options(a) : std::nullopt;
  std::optional<MixtureConfig> run_mix;
  if (run) {
    const json& data = run->first.value("data", json());
    if (data.is_object() && data.value("kind", "") == "mixture") {
      t.run_tokens = data.value("tokens", "");
      if (data.contains("mixture"))
        run_mix = MixtureConfig::from_json(data["mixture"], run->second + ":data.mixture");
    }
  }
  if (a.no_audit) return t;
  if (!a.train_domains.empty()) {
    t.text = eval::TrainText::of_domains(a.train_corpus, a.train_domains);
    t.from = "--train-domains";
  } else if (!a.mixture.empty()) {
    t.text = eval::TrainText{a.train_corpus, eval::mixture_sources(MixtureConfig::load(a.mixture))};
    t.from = a.mixture;
  } else if (run_mix) {
    t.text = eval::TrainText{a.train_corpus, eval::mixture_sources(*run_mix)};
    t.from = run->second;
    if (t.text->corpus.empty() && !t.run_tokens.empty())
      t.text->corpus = existing_dir(TokenManifest::load(t.run_tokens).corpus);
  }
  if (t.text && t.text->corpus.empty()) t.text->corpus = eval_corpus;
  return t;
}

std::optional<eval::NgramIndex> build_index(const EvalArgs& a,
                                            const std::optional<eval::TrainText>& train) {
  if (!train) return std::nullopt;
  eval::IndexOptions io;
  io.n = a.ngram;
  io.target_fp = a.fp_rate;
  io.max_bytes = uint64_t(a.bloom_mb * double(1 << 20));
  io.threads = a.threads;
  io.progress = !a.quiet && parallel::world().is_root();
  return eval::build_ngram_index(*train, io);
}

int run_task_eval(const EvalArgs& a);

int run_eval(EvalArgs a) {
  a.dtype.apply();
  if (!a.tasks.empty()) return run_task_eval(a);
  const ModelConfig cfg = load_config(a.checkpoint);
  // Where the training data is described, in order: --train-domains, --mixture, the run.
  const bool need_run = (a.train_domains.empty() && a.mixture.empty()) || a.tokens.empty();
  if (a.tokens.empty()) a.tokens = training_data(a, need_run, "").run_tokens;
  MARIN_CHECK(!a.tokens.empty(),
              "eval: --token-dir is required (no run directory with a mixture to take it from)");
  const TokenManifest man = TokenManifest::load(a.tokens);
  if (a.corpus.empty()) a.corpus = existing_dir(man.corpus);
  const TrainingData td = training_data(a, need_run, a.corpus);
  const std::optional<eval::TrainText>& train = td.text;
  const std::string& train_from = td.from;
  if (train && train->corpus.empty())
    fail("eval: the training text is needed for the contamination audit: give --train-corpus");
  if (train && a.corpus.empty())
    fail(
        "eval: the evaluation text is needed for the contamination audit: give --corpus "
        "(the manifest of {} names {}, which does not exist here)",
        a.tokens, man.corpus);

  // The tokenizer check.
  uint64_t tok_hash = 0;
  std::string tok_path = a.tokenizer;
  if (tok_path.empty() && fs::exists(fs::path(a.checkpoint) / "tokenizer.json"))
    tok_path = (fs::path(a.checkpoint) / "tokenizer.json").string();
  if (!tok_path.empty()) {
    tok_hash = Tokenizer::load(tok_path).hash();
    if (tok_hash != man.tokenizer_hash)
      fail(
          "tokenizer mismatch: {} has hash {} but the token shards in {} were made with a "
          "tokenizer of hash {}; re-tokenize the corpus with the checkpoint's tokenizer "
          "(marin tokenize --tokenizer {}) or pass the matching --token-dir",
          tok_path, hex64(tok_hash), a.tokens, hex64(man.tokenizer_hash), tok_path);
  } else if (!a.quiet) {
    fmt::print(stderr,
               "marin: warning: {} has no tokenizer.json: the shards' tokenizer ({}) is not "
               "checked against the model's\n",
               a.checkpoint, hex64(man.tokenizer_hash));
  }

  MARIN_CHECK(a.batch >= 1, "eval: --batch must be ≥ 1, got {}", a.batch);
  Model<float> m(cfg, a.batch, ModelUse::Inference);
  load_params(a.checkpoint, m.table(), m.params().data(), a.allow_nonfinite);

  const std::optional<eval::NgramIndex> index = build_index(a, train);

  eval::EvalOptions o;
  o.token_dir = a.tokens;
  o.domains = a.domains;
  o.corpus = a.corpus;
  o.stride = a.stride;
  o.max_tokens = a.max_tokens;
  o.tokenizer_hash = tok_hash;
  o.skip_empty = a.skip_empty;
  o.index = index ? &*index : nullptr;
  o.threshold = a.threshold;
  // Under mpirun the documents are split over the ranks; every rank gets the whole report and
  // rank 0 prints it.
  parallel::Comm& world = parallel::world();
  o.group = &world;
  o.progress = !a.quiet && world.is_root();
  const eval::EvalReport rep = eval::evaluate_domains(m, o);
  if (!world.is_root()) return 0;

  fmt::print("checkpoint {} on {} ({} text: {})\n", a.checkpoint, a.tokens,
             a.corpus.empty() ? "no" : "with", a.corpus.empty() ? "-" : a.corpus);
  if (index) {
    std::vector<std::string> src;
    for (const auto& s : index->source.sources) src.push_back(s.domain + ":" + s.split);
    fmt::print(
        "contamination audit: {}-grams of {} ({}; from {}): {} n-grams, Bloom filter {:.1f} MB, "
        "k = {}, false-positive rate {:.2e} per n-gram\n",
        index->n, index->source.corpus, fmt::join(src, ", "), train_from, index->ngrams,
        double(index->bloom.bytes()) / 1e6, index->bloom.k(), index->bloom.fp_rate());
  } else {
    fmt::print(
        "contamination audit: off ({}training data unknown: give --train-corpus with "
        "--train-domains or --mixture, or a checkpoint of a run directory)\n",
        a.no_audit ? "--no-audit; " : "");
  }
  fmt::print("{}", rep.table());
  if (!a.json_out.empty()) {
    json j = rep.to_json();
    j["checkpoint"] = a.checkpoint;
    j["tokens"] = a.tokens;
    j["corpus"] = a.corpus;
    j["tokenizer_hash"] = hex64(man.tokenizer_hash);
    j["tokenizer_checked"] = !tok_path.empty();
    if (index) j["audit"]["from"] = train_from;
    write_file_atomic(a.json_out, j.dump(2) + "\n");
  }
  return 0;
}

// --log-samples: samples_<task>_<date>.jsonl beside the --json report, as the harness's
// evaluation tracker names them (date: ISO time with ':' replaced by '-').
void write_harness_samples(const std::string& json_out, const std::vector<eval::TaskItems>& tasks,
                           const eval::TaskResults& r) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t tt = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&tt, &tm);
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  const std::string date =
      fmt::format("{:04}-{:02}-{:02}T{:02}-{:02}-{:02}.{:06}", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
  const fs::path dir = fs::path(json_out).parent_path();
  for (size_t i = 0; i < tasks.size() && i < r.tasks.size(); ++i) {
    std::string lines;
    for (const json& e : eval::harness_samples(tasks[i], r.tasks[i])) lines += e.dump() + "\n";
    write_file_atomic((dir / fmt::format("samples_{}_{}.jsonl", r.tasks[i].task, date)).string(),
                      lines);
  }
}

// marin eval --tasks: harness tasks scored on the checkpoint, with the audit's split.
int run_task_eval(const EvalArgs& a) {
  const ModelConfig cfg = load_config(a.checkpoint);
  std::string tok_path = a.tokenizer;
  if (tok_path.empty()) tok_path = (fs::path(a.checkpoint) / "tokenizer.json").string();
  MARIN_CHECK(fs::exists(tok_path),
              "eval --tasks: {} does not exist: give the model's tokenizer with --tokenizer",
              tok_path);
  const Tokenizer tok = Tokenizer::load(tok_path);
  const TrainingData td = training_data(a, a.train_domains.empty() && a.mixture.empty(), a.corpus);
  if (td.text && td.text->corpus.empty())
    fail("eval: the training text is needed for the contamination audit: give --train-corpus");
  eval::RenderOptions ro;
  if (a.num_fewshot >= 0) ro.num_fewshot = a.num_fewshot;
  ro.fewshot_seed = a.fewshot_seed;
  ro.timeout_s = a.task_timeout;
  ro.trust_task_code = a.trust_task_code;
  ro.dataset_root = a.dataset_root;
  std::vector<eval::TaskItems> tasks;
  std::vector<eval::TaskGroup> groups;
  for (const std::string& f : eval::resolve_task_files(a.tasks, a.task_dir, &groups))
    tasks.push_back(eval::load_task_file(f, ro));
  const std::optional<eval::NgramIndex> index = build_index(a, td.text);

  MARIN_CHECK(a.batch >= 1, "eval: --batch must be ≥ 1, got {}", a.batch);
  Model<float> m(cfg, a.batch, ModelUse::Inference);
  load_params(a.checkpoint, m.table(), m.params().data(), a.allow_nonfinite);
  eval::TaskOptions o;
  o.limit = a.limit;
  o.index = index ? &*index : nullptr;
  o.threshold = a.threshold;
  o.log_samples = a.log_samples;
  o.shared_context = a.shared_context;
  o.generation_batch = a.gen_batch;
  o.bootstrap_iters = a.bootstrap_iters;
  o.progress = !a.quiet && parallel::world().is_root();
  o.group = &parallel::world();  // under mpirun the forward passes are split over the ranks
  eval::TaskResults r = eval::score_tasks(m, tok, tasks, o);
  r.groups = groups;
  if (!parallel::world().is_root()) return 0;
  fmt::print("checkpoint {} (seq_len {}), tokenizer {}\n", a.checkpoint, cfg.seq_len, tok_path);
  if (index)
    fmt::print("contamination audit: {}-grams of {} (from {}): {} n-grams\n", index->n,
               index->source.corpus, td.from, index->ngrams);
  else
    fmt::print("contamination audit: off (training data unknown)\n");
  fmt::print("{}", r.table());
  if (!a.json_out.empty()) {
    const json run = {{"model", "marin"},
                      {"model_args", "checkpoint=" + a.checkpoint},
                      {"batch_size", a.batch},
                      {"limit", a.limit ? json(a.limit) : json(nullptr)},
                      {"num_fewshot", a.num_fewshot >= 0 ? json(a.num_fewshot) : json(nullptr)},
                      {"fewshot_seed", a.fewshot_seed},
                      {"bootstrap_iters", a.bootstrap_iters},
                      {"seq_len", cfg.seq_len},
                      {"tokenizer", tok_path},
                      {"tokenizer_hash", hex64(tok.hash())}};
    json j = r.to_json(run);
    if (index) j["marin"]["audit"]["from"] = td.from;
    write_file_atomic(a.json_out, j.dump(2) + "\n");
    if (a.log_samples) write_harness_samples(a.json_out, tasks, r);
  }
  return 0;
}

}  // namespace

MARIN_COMMAND(
    eval, "eval",
    "Per-domain loss and bits per byte of a checkpoint (dropless), with a contamination audit",
    [](CLI::App& app) -> Runner {
      auto a = std::make_shared<EvalArgs>();
      app.add_option("--checkpoint", a->checkpoint,
                     "model directory (config.json, "
                     "model.safetensors [, tokenizer.json])")
          ->required();
      app.add_option("--token-dir", a->tokens,
                     "token directory (marin tokenize); default: the run's training tokens");
      add_deprecated(app, "--tokens", "--token-dir", a->tokens);
      app.add_option("--domains", a->domains,
                     "evaluation domains (default: every domain with "
                     "valid shards)")
          ->delimiter(',');
      app.add_option("--corpus", a->corpus,
                     "text corpus of the token directory (default: the manifest's, if present)");
      app.add_option("--stride", a->stride,
                     "sliding-window stride for documents longer than seq_len (default seq_len/2)")
          ->check(in_range<int64_t>(1, int64_t(1) << 20));
      app.add_option("--max-tokens", a->max_tokens,
                     "score a fixed subset per domain: documents in order that fit this many "
                     "tokens (default: all)")
          ->check(in_range<int64_t>(1, INT64_MAX));
      app.add_option("--batch", a->batch, "rows per forward pass")
          ->capture_default_str()
          ->check(batch_range());
      app.add_option("--json", a->json_out, "write the JSON report here");
      app.add_option("--train-corpus", a->train_corpus,
                     "text corpus of the training data (default: the evaluation corpus)");
      app.add_option("--train-domains", a->train_domains, "training domains (train split)")
          ->delimiter(',');
      app.add_option("--mixture", a->mixture,
                     "mixture config of the run (its sources with a positive weight are the "
                     "training data)");
      app.add_option("--run", a->run,
                     "run directory whose run.json describes the training data (default: found "
                     "from the checkpoint)");
      app.add_option("--ngram", a->ngram, "n of the contamination n-grams")
          ->capture_default_str()
          ->check(in_range<int>(1, 1000));
      app.add_option("--threshold", a->threshold,
                     "contaminated when the fraction of a document's n-grams seen in training "
                     "is above this")
          ->capture_default_str()
          ->check(in_range<double>(0, 1));
      app.add_option("--fp-rate", a->fp_rate, "target Bloom filter false-positive rate per n-gram")
          ->capture_default_str()
          ->check(in_range<double>(0, 1, /*open_lo=*/true));
      app.add_option("--bloom-mb", a->bloom_mb, "cap on the Bloom filter size (MiB)")
          ->capture_default_str()
          ->check(in_range<double>(0, double(1 << 30), /*open_lo=*/true));
      app.add_option("--tokenizer", a->tokenizer,
                     "tokenizer to check the shards against (default: CHECKPOINT/tokenizer.json)");
      app.add_flag("--no-audit", a->no_audit, "skip the contamination audit");
      app.add_flag("--skip-empty", a->skip_empty,
                   "skip a domain with nothing to score (with a warning) instead of failing");
      app.add_option("--threads", a->threads,
                     "compute threads of this process (the n-gram index's too)")
          ->capture_default_str()
          ->check(threads_range());
      app.add_flag("--quiet", a->quiet, "no progress lines or warnings on stderr");
      a->dtype.add(app);
      app.add_flag("--allow-nonfinite", a->allow_nonfinite, kAllowNonfiniteHelp);
      app.add_option("--tasks", a->tasks,
                     "score downstream tasks instead of domains: names (in --task-dir), harness "
                     "YAML files or rendered JSONL, comma-separated")
          ->delimiter(',');
      app.add_option("--task-dir", a->task_dir,
                     "directory of harness task YAML files, indexed by task, tag and group "
                     "names (repeatable; e.g. marin tasks build's, or lm_eval/tasks)");
      app.add_option("--limit", a->limit, "score the first N items of each task (0: all)");
      app.add_option("--task-timeout", a->task_timeout,
                     "seconds the task renderer may run per YAML task before it is stopped "
                     "(0: no limit)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--dataset-root", a->dataset_root,
                     "local copies of Hub datasets: dataset_path P, dataset_name N is read from "
                     "DIR/P/N/, DIR/P/data/ or DIR/P/ (split S: S.jsonl or S-*.jsonl, also .json, "
                     ".jsonl.gz, .jsonl.zst)");
      app.add_flag("--trust-task-code", a->trust_task_code,
                   "run the Python functions a task file names with !function (process_docs, "
                   "doc_to_text, doc_to_target, doc_to_choice), from the task's own directory");
      app.add_option("--num-fewshot", a->num_fewshot,
                     "few-shot examples per item (default: the task's num_fewshot)")
          ->check(in_range<int>(0, 1000));
      app.add_option("--fewshot-seed", a->fewshot_seed, "seed of the few-shot draw")
          ->capture_default_str();
      app.add_option("--bootstrap-iters", a->bootstrap_iters,
                     "bootstrap resamples for the perplexity's standard error")
          ->capture_default_str();
      app.add_flag("--log-samples", a->log_samples,
                   "put every item's context, choices and log-likelihoods in the --json output");
      app.add_flag("--shared-context", a->shared_context,
                   "multiple choice: decode each item's context once (the decoding cache) and "
                   "continue every choice from it, instead of re-reading it per choice");
      app.add_option("--gen-batch", a->gen_batch,
                     "generate_until: prompts decoded together, one token of each per forward "
                     "(the harness's batch_size)")
          ->capture_default_str()
          ->check(in_range<int64_t>(1, 4096));
      return [a] { return run_eval(*a); };
    });

}  // namespace marin::cli
