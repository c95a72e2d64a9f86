#include "train/trainer.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
#include "core/timer.hpp"
#include "data/loader.hpp"
#include "data/mixture.hpp"
#include "data/shards.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "eval/domain_eval.hpp"
#include "eval/macro_metric.hpp"
#include "eval/tasks/task_items.hpp"
#include "eval/tasks/task_scorer.hpp"
#include "kernels/kernels.hpp"
#include "kernels/optim.hpp"
#include "kernels/threads.hpp"
#include "model/expert_shard.hpp"
#include "model/moe/router_stats.hpp"
#include "parallel/agreement.hpp"
#include "train/checkpoint.hpp"
#include "train/finite_check.hpp"
#include "train/run_lock.hpp"
#include "train/run_state_check.hpp"
#include "train/train_option_table.hpp"

namespace marin {
namespace fs = std::filesystem;

struct TrainerTasks {
  std::vector<eval::TaskItems> tasks;
  Tokenizer tok;
  std::optional<eval::NgramIndex> index;
  std::string audit_from;  // what the index was built from ("" when not audited)
};

namespace {

// SIGINT (Ctrl-C), SIGTERM (Slurm, Kubernetes, mpirun forwarding) and SIGUSR1 (Slurm's warning
// before the time limit) all mean: save a checkpoint at the end of this step and stop.
std::atomic<int> g_signal{0};
void on_signal(int sig) {
  g_signal = sig;
}
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};

std::string format_duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const int64_t t = int64_t(s);
  if (t >= 3600) return fmt::format("{}h{:02d}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02d}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

// Sum of squares of a strided set of tensors, per optimizer group.
struct GroupNorms {
  double sq[4] = {0, 0, 0, 0};
  nlohmann::json json() const {
    return {{"muonh", std::sqrt(sq[0])}, {"adamh", std::sqrt(sq[1])}, {"adam", std::sqrt(sq[2])}};
  }
};

// Over the tensors this rank updates (its optimizer shards: each tensor, or each expert shard of
// one, is updated by exactly one rank), then summed over all ranks.
GroupNorms group_norms(const ParamTable& t, const float* x, const Optimizer& opt,
                       parallel::Comm& comm) {
  GroupNorms g;
  for (auto& p : t.params()) {
    if (!opt.owns(p.offset)) continue;
    g.sq[int(p.group)] += kernels::sum_squares(x + p.offset, p.size);
  }
  comm.allreduce(g.sq, 4);
  return g;
}

// The cross-rank reductions of QB balancing over the data-parallel group.
class CommQBReducer final : public QBReducer {
 public:
  explicit CommQBReducer(parallel::Comm& c) : c_(c) {}
  void reduce_range(QBRange& r) override {
    c_.allreduce(&r.lo, 1, parallel::Op::Min);
    c_.allreduce(&r.max, 1, parallel::Op::Max);
  }
  void reduce_counts(int64_t* counts, int64_t n) override { c_.allreduce(counts, n); }
  int64_t reduce_tokens(int64_t local) override { return c_.allreduce(local); }

 private:
  parallel::Comm& c_;
};

// Keeps the lines of RUN/metrics.jsonl for steps before `step` (the checkpoint a run resumes
// from), so every step appears once after a resume; a torn last line from a crash goes too.
void truncate_metrics(const std::string& run_dir, int64_t step) {
  const std::string path = run_dir + "/metrics.jsonl";
  if (!fs::exists(path)) return;
  const std::string text = read_file(path);
  std::string kept;
  for (const std::string_view line : split_lines(text)) {
    const auto j = try_parse_json(line);
    if (j && j->is_object() && j->contains("step") && (*j)["step"].is_number_integer() &&
        (*j)["step"].get<int64_t>() < step)
      kept.append(line).append("\n");
  }
  write_file_atomic(path, kept);
}

// The compute threads of a resumed run (kernels/threads.hpp): the count its checkpoint
// records, unless the user chose one; a chosen count that differs runs, with `warning` saying
// what it costs. Returns the resume line's words for it.
std::string resume_threads(const std::string& ckpt_dir, int recorded, std::string& warning) {
  if (recorded > 0 && !kernels::compute_threads_chosen())
    kernels::set_compute_threads(recorded, /*chosen=*/false);
  const int now = kernels::compute_threads();
  if (recorded > 0 && now != recorded)
    warning = fmt::format(
        "{} was written at {} compute threads and this process has {} (--threads, "
        "OMP_NUM_THREADS): the run goes on, but not bit-identically to an uninterrupted one "
        "(oneDNN's fp32 GEMMs sum in an order that depends on the thread count); --threads {} "
        "continues it bit-identically",
        ckpt_dir, recorded, now, recorded);
  return fmt::format(
      "{} compute thread{}{}", now, now > 1 ? "s" : "",
      recorded > 0 && !kernels::compute_threads_chosen() ? ", the checkpoint's" : "");
}

// Copies a micro-batch's routing (logits and α, what QB reads) into the step's log at row `at`.
void log_routing(Routing<float>& log, const Routing<float>& r, int64_t at) {
  std::copy(r.logits.data(), r.logits.data() + r.rows * r.E, log.logits.data() + at * r.E);
  std::copy(r.alpha.data(), r.alpha.data() + r.rows, log.alpha.data() + at);
}

}  // namespace

std::unique_ptr<BatchSource> make_batch_source(const nlohmann::json& spec, const TrainOptions& o) {
  if (spec.is_null()) return nullptr;
  const ModelConfig& c = o.model;
  const std::string kind = spec.value("kind", "");
  if (kind == "rows")
    return make_rows_source(spec.at("path").get<std::string>(), c.seq_len, c.vocab_size);
  if (kind == "mixture") {
    LoaderOptions lo;
    lo.token_dir = spec.at("tokens").get<std::string>();
    lo.seq_len = c.seq_len;
    lo.rows_per_step = o.batch;
    lo.total_steps = o.steps;
    lo.seed = o.seed;
    lo.vocab_size = uint32_t(c.vocab_size);
    if (!o.tokenizer.empty()) lo.tokenizer_hash = Tokenizer::load(o.tokenizer).hash();
    return std::make_unique<MixtureLoader>(MixtureConfig::from_json(spec.at("mixture"), "mixture"),
                                           lo);
  }
  if (kind == "valid") {
    // The validation split of the given domains, in order (the same rows at every evaluation).
    const std::string dir = spec.at("tokens").get<std::string>();
    const TokenManifest m = TokenManifest::load(dir);
    const uint64_t hash =
        o.tokenizer.empty() ? m.tokenizer_hash : Tokenizer::load(o.tokenizer).hash();
    // Each shard cross-checked against the manifest (vocabulary, documents, tokens, bytes).
    std::vector<TokenShard> shards;
    for (auto& d : spec.at("domains"))
      for (auto& sh : m.find(d.get<std::string>(), "valid"))
        shards.push_back(m.open(sh, hash, uint32_t(c.vocab_size)));
    if (shards.empty())
      fail("{}: no validation shards for domains {}", dir, spec.at("domains").dump());
    return std::make_unique<ValidationSource>(std::move(shards), c.seq_len);
  }
  fail("unknown data source kind '{}' in {}", kind, spec.dump());
}

void Trainer::setup(const TrainOptions& o, const std::string& run_dir, parallel::Comm* comm,
                    bool fresh) {
  opt_ = o;
  run_dir_ = run_dir;
  comm_ = comm ? comm : &parallel::world();
  const int N = comm_->size();
  // Before the first collective that depends on an option: ranks launched with different
  // options end here, naming them, instead of waiting for each other forever.
  parallel::require_agreement(*comm_, o.to_json(), "options");
  if (o.batch <= 0) fail("--batch must be positive, got {}", o.batch);
  // The micro-batch is a property of the run (the unit of the exact gradient sum), not of the
  // rank count (a checkpoint from before it was recorded gets the default).
  if (opt_.micro_batch <= 0) opt_.micro_batch = default_micro_batch(o.batch);
  micro_ = opt_.micro_batch;
  if (o.batch % micro_ != 0) fail("--micro-batch {} does not divide --batch {}", micro_, o.batch);
  units_ = o.batch / micro_;
  if (units_ % N != 0)
    fail(
        "--batch {} cannot be split over {} ranks: it is {} micro-batches of {} rows "
        "(--micro-batch), and the rank count must divide that number",
        o.batch, N, units_, micro_);
  local_units_ = units_ / N;
  // The compute dtype, resolved on this CPU (a bf16 request oneDNN cannot run falls back to fp32
  // with one line saying why); set again before each step, as other trainers may share the
  // process.
  const kernels::DtypeChoice dt = kernels::resolve_dtype(o.dtype);
  if (!dt.message.empty() && comm_->is_root()) fmt::print(stderr, "{}\n", dt.message);
  dtype_ = dt.dtype;  // in force while this trainer computes (kernels::DtypeScope)
  // The run directory is this run's until it ends (run_lock.hpp); rank 0 is its one writer.
  if (comm_->is_root() && !lock_) lock_ = claim_run_dir(run_dir, fresh, o.overwrite);
  comm_->barrier();
  if (o.ep < 1 || N % o.ep != 0)
    fail("--ep {} must be at least 1 and divide the number of ranks ({})", o.ep, N);
  if (o.model.num_experts % o.ep != 0)
    fail("--ep {} must divide num_experts ({})", o.ep, o.model.num_experts);
  if (o.ep > 1 && o.eval_domains_every > 0)
    fail(
        "--eval-domains-every is not supported with --ep > 1 (its documents are split unevenly "
        "over the ranks, while expert-parallel forwards run in lockstep): evaluate a checkpoint "
        "with `marin eval` instead");
  if (o.ep > 1 && !o.tasks.empty())
    fail(
        "--tasks is not supported with --ep > 1 (expert-parallel forwards run in lockstep): "
        "score a checkpoint with `marin eval --tasks` instead");
  if (o.tasks_every > 0 && o.tasks.empty())
    fail("--tasks-every {} needs --tasks (the downstream tasks to score)", o.tasks_every);
  if (!o.tasks.empty() && o.tokenizer.empty())
    fail("--tasks needs the model's tokenizer (--tokenizer FILE)");
  if (o.ep > 1) {
    // Replica d = ranks d·P … d·P + P − 1 (an expert-parallel group: neighbours, like Megatron's
    // EP inside a node); shard j's replicas: ranks j, j + P, ….
    experts_ = comm_->split(comm_->rank() / o.ep, comm_->rank());
    replicas_ = comm_->split(comm_->rank() % o.ep, comm_->rank());
  }
  full_table_ = std::make_unique<ParamTable>(o.model);
  {
    const kernels::DtypeScope in(dtype_);  // the model's memory admission counts its bf16 copy
    model_ = std::make_unique<Model<float>>(o.model, micro_, experts_.get());
  }
  model_->set_dispatch({o.transport, o.waves, N > 1 ? comm_ : nullptr});
  // The regions of the flat buffer and who shares them: the dense tensors all ranks, an expert
  // shard its replicas.
  const ParamTable& table = model_->table();
  const int64_t eb = table.expert_begin();
  std::vector<ParamRegion> regions = {{{0, eb}, comm_}};
  if (eb < table.total()) regions.push_back({{eb, table.total()}, replicas_.get()});
  optimizer_ = std::make_unique<Optimizer>(table, o.optim, regions, experts_.get());
  partials_.resize(size_t(local_units_ - 1));
  for (auto& p : partials_) p.resize(size_t(table.total()));
  expert_partials_.resize(ep() > 1 ? size_t(local_units_ - 1) : 0);
  for (auto& p : expert_partials_) p.resize(model_->source_grads().size());
  std::vector<parallel::Segment> segments;
  for (auto& p : table.params()) segments.push_back({p.offset, p.size});
  std::vector<parallel::SumRegion> sums;
  for (auto& r : optimizer_->regions()) sums.push_back({r.where.range, r.where.group, r.shards});
  grad_sum_ = std::make_unique<parallel::ExactSum>(segments, table.total(), sums);
  data_ = make_batch_source(o.data, o);
  if (!data_) fail("no training data given (--rows or --data)");
  // A run that needs more rows than its data holds repeats them: say so (or refuse).
  const int64_t distinct = data_->distinct_rows(), needed = o.steps * int64_t(o.batch);
  if (distinct > 0 && needed > distinct) {
    const std::string what = fmt::format(
        "{}: the run reads {} rows ({} steps × batch {}), {:.1f} passes over its {} rows",
        data_->describe(), needed, o.steps, o.batch, double(needed) / double(distinct), distinct);
    if (o.strict_data) fail("{} (--strict-data)", what);
    if (comm_->is_root())
      fmt::print(stderr,
                 "marin: warning: {}; the model will see each row again (--strict-data refuses)\n",
                 what);
  }
  valid_ = make_batch_source(o.valid, o);
  if (N > 1) qb_reducer_ = std::make_unique<CommQBReducer>(*comm_);
  qb_ = QBBalancer(o.model.qb_bins, qb_reducer_.get());
  const ModelConfig& c = o.model;
  routing_log_.resize(size_t(c.num_layers));
  router_acc_.resize(size_t(c.num_layers));
  for (auto& r : routing_log_) {
    r.rows = int64_t(local_units_) * micro_ * c.seq_len, r.E = c.num_experts, r.K = c.top_k;
    r.logits.resize(size_t(r.rows * r.E));
    r.alpha.resize(size_t(r.rows));
  }
  const size_t n = size_t(o.batch) * c.seq_len;
  tokens_.resize(n);
  labels_.resize(n);
  seg_.resize(n);
}

Trainer::Trainer(const TrainOptions& o, const std::string& run_dir, const std::string& init_dir,
                 parallel::Comm* comm) {
  TrainOptions opts = o;
  opts.resolve_hparams();
  // The checkpoint's model is checked before anything (data included) is sized from the options.
  if (!init_dir.empty() && load_config(init_dir).to_json() != opts.model.to_json())
    fail(
        "{}/config.json does not match the run's model configuration (give no --preset, "
        "--config or --set with --init to train the checkpoint's own model)",
        init_dir);
  setup(opts, run_dir, comm);
  if (!init_dir.empty()) {
    Buffer<float> full(size_t(full_table_->total()));
    load_params(init_dir, *full_table_, full.data());
    load_full_state(full.data(), nullptr, nullptr);
    lineage_ = {{"init", init_dir}};
  } else {
    model_->init(opts.seed);
  }
}

std::unique_ptr<Trainer> Trainer::resume(const std::string& run_dir, parallel::Comm* comm,
                                         const ResumeChanges& changes) {
  const std::vector<std::string> ckpts = checkpoint_dirs(run_dir);
  if (ckpts.empty()) fail("{}: no complete checkpoint to resume from", run_dir);
  parallel::Comm& c = comm ? *comm : parallel::world();
  // One lock for every attempt below (a failed attempt's trainer must not release it).
  std::shared_ptr<RunLock> lock;
  if (c.is_root()) lock = claim_run_dir(run_dir, /*fresh=*/false, /*overwrite=*/false);
  // The newest checkpoint that passes every check, each rejected one named with its reason; the
  // checks read the same files on every rank, so every rank settles on the same checkpoint.
  std::string newest_error;
  for (const std::string& ckpt : ckpts) {
    try {
      return resume_from(ckpt, run_dir, comm, changes, lock);
    } catch (const Error& e) {
      if (newest_error.empty()) newest_error = e.what();
      if (c.is_root())
        fmt::print(stderr, "marin: warning: skipping checkpoint {}: {}\n", ckpt, e.what());
    }
  }
  fail("{}: no checkpoint passes the checks for a resume; the newest: {}", run_dir, newest_error);
}

std::unique_ptr<Trainer> Trainer::resume_from(const std::string& ckpt_dir,
                                              const std::string& run_dir, parallel::Comm* comm,
                                              const ResumeChanges& changes,
                                              std::shared_ptr<RunLock> lock) {
  RunState st = read_run_state(ckpt_dir);
  check_run_state(ckpt_dir, st);
  std::string threads_warning;
  const std::string threads_note = resume_threads(ckpt_dir, st.threads, threads_warning);
  st.options.time_limit_s = 0;  // each invocation's own (--time-limit, applied by the edit)
  const TrainOptions before = st.options;
  if (changes.edit) changes.edit(st.options);
  if (!st.options.forecast.empty())
    for (const TrainOption& s : train_option_table())
      if (s.on_resume == OnResume::NotWithForecast && s.get(st.options) != s.get(before))
        fail("{} cannot change on --resume of a run tracked against a forecast ({}: it binds them)",
             s.flag, st.options.forecast);
  if (st.options.steps != before.steps) {
    if (st.options.steps < st.step)
      fail("--steps {}: {} has already done {} steps", st.options.steps, ckpt_dir, st.step);
    st.options.optim.total_steps = st.options.steps;  // the schedule's horizon moves with it
  }
  if (st.options.transport != before.transport || st.options.waves != before.waves ||
      st.options.ep != before.ep) {
    if (!st.lineage.is_object()) st.lineage = nlohmann::json::object();
    st.lineage["switches"].push_back({{"at_step", st.step},
                                      {"transport", transport_name(st.options.transport)},
                                      {"waves", st.options.waves},
                                      {"ep", st.options.ep},
                                      {"from", transport_name(before.transport)},
                                      {"from_ep", before.ep}});
  }
  std::unique_ptr<Trainer> t(new Trainer());
  t->lock_ = std::move(lock);
  t->setup(st.options, run_dir, comm, /*fresh=*/false);
  Buffer<float> p, m, v;
  load_run_checkpoint(ckpt_dir, *t->full_table_, p, m, v);
  t->load_full_state(p.data(), m.data(), v.data());
  try {
    t->data_->restore(st.data_state);
  } catch (const Error& e) {
    fail("{}/state.json: data: {}", ckpt_dir, e.what());
  }
  t->step_ = st.step;
  t->lineage_ = st.lineage;
  if (t->is_root()) truncate_metrics(run_dir, st.step);
  if (t->is_root())
    fmt::print(stderr, "resuming {} from {} (step {}, {} rank{}, {})\n", run_dir, ckpt_dir, st.step,
               t->comm_->size(), t->comm_->size() > 1 ? "s" : "", threads_note);
  if (t->is_root() && !threads_warning.empty())
    fmt::print(stderr, "marin: warning: {}\n", threads_warning);
  return t;
}

std::unique_ptr<Trainer> Trainer::fork(const std::string& ckpt_dir, const std::string& run_dir,
                                       const TrainOptions& changed, parallel::Comm* comm) {
  RunState st = read_run_state(ckpt_dir);
  if (changed.model.to_json() != st.options.model.to_json()) {
    // Only non-structural model fields may change on a fork (capacity factor, z-loss, ...).
    ModelConfig a = changed.model, b = st.options.model;
    a.capacity_factor = b.capacity_factor;
    a.z_loss = b.z_loss;
    if (a.to_json() != b.to_json())
      fail("--fork-from {}: a fork cannot change the model's shape", ckpt_dir);
  }
  TrainOptions o = changed;
  o.optim.total_steps = o.steps;
  std::unique_ptr<Trainer> t(new Trainer());
  t->setup(o, run_dir, comm);
  Buffer<float> p, m, v;
  load_run_checkpoint(ckpt_dir, *t->full_table_, p, m, v);
  t->load_full_state(p.data(), m.data(), v.data());
  // The data position carries over when the data is the same; a changed mixture starts fresh.
  if (o.data == st.options.data) t->data_->restore(st.data_state);
  t->step_ = st.step;
  t->lineage_ = {{"forked_from", fs::absolute(ckpt_dir).string()},
                 {"at_step", st.step},
                 {"parent_options", st.options.to_json()},
                 {"parent_lineage", st.lineage}};
  if (t->is_root()) write_file_atomic(run_dir + "/lineage.json", t->lineage_.dump(2) + "\n");
  return t;
}

void Trainer::load_full_state(const float* params, const float* m, const float* v) {
  const ParamTable& local = model_->table();
  take_shard(*full_table_, params, local, model_->params().data());
  if (!m) return;
  Buffer<float> lm(size_t(local.total())), lv(size_t(local.total()));
  take_shard(*full_table_, m, local, lm.data());
  take_shard(*full_table_, v, local, lv.data());
  optimizer_->load_state(lm.data(), lv.data());
}

Trainer::~Trainer() {
  if (metrics_) fclose(metrics_);
}

void Trainer::write_metrics(const nlohmann::json& j) {
  if (!is_root()) return;
  // A failed write (a full disk, a read-only file) is kept, not thrown: run() stops every rank
  // at the end of the step with a checkpoint and this message, so nothing trained is lost.
  if (!metrics_error_.empty()) return;
  const std::string path = run_dir_ + "/metrics.jsonl";
  if (!metrics_) metrics_ = fopen(path.c_str(), "a");
  if (!metrics_) {
    metrics_error_ = fmt::format("{}: cannot open for append: {}", path, std::strerror(errno));
    return;
  }
  const std::string line = j.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), metrics_) != line.size() ||
      std::fflush(metrics_) != 0)
    metrics_error_ = fmt::format("{}: cannot write: {}", path, std::strerror(errno));
}

std::string Trainer::save_checkpoint() {
  Buffer<float> m, v;
  optimizer_->gather_state(m, v);  // collective: each region on its group's rank 0
  // Expert parallelism: the first replica's ranks (each its shard's region root) assemble the
  // full stacks on rank 0.
  Buffer<float> full_p, full_m, full_v;
  const float* params = model_->params().data();
  if (ep() > 1 && comm_->rank() < ep()) {
    const size_t n = is_root() ? size_t(full_table_->total()) : 0;
    full_p.resize(n), full_m.resize(n), full_v.resize(n);
    gather_shards(model_->table(), params, *full_table_, full_p.data(), *experts_);
    gather_shards(model_->table(), m.data(), *full_table_, full_m.data(), *experts_);
    gather_shards(model_->table(), v.data(), *full_table_, full_v.data(), *experts_);
    params = full_p.data();
    std::swap(m, full_m), std::swap(v, full_v);
  }
  std::string dir;
  if (is_root()) {
    RunState st{step_, opt_, data_->state(), lineage_, kernels::compute_threads()};
    dir = save_run_checkpoint(run_dir_, st, opt_.model, *full_table_, params, m, v);
    prune_checkpoints(run_dir_, dir, opt_.keep_every);
  }
  comm_->broadcast(dir);  // also: no rank goes on before the checkpoint is published
  return dir;
}

LossStats Trainer::forward_backward(bool backward) {
  const int64_t S = opt_.model.seq_len;
  // Every rank normalises by the global batch's scored tokens (it holds the whole batch).
  int64_t scored = 0;
  for (int32_t l : labels_) scored += l >= 0;
  if (backward) model_->begin_step(int64_t(opt_.batch) * S);  // capacity over the whole step
  LossStats sum;
  for (int w = 0; w < local_units_; ++w) {
    // Wave w: rank r computes micro-batch w·N + r (a wave is in row order across the ranks).
    const int64_t unit = int64_t(w) * comm_->size() + comm_->rank();
    const size_t at = size_t(unit * micro_ * S);
    const LossStats s = model_->forward({micro_, tokens_.data() + at, labels_.data() + at,
                                         seg_.data() + at, scored, w > 0,
                                         /*evaluation=*/!backward});
    sum.loss += s.loss, sum.ce += s.ce, sum.z += s.z;
    if (!backward) continue;
    for (int64_t l = 0; l < opt_.model.num_layers; ++l) {
      const auto& moe = model_->block(l).moe();
      log_routing(routing_log_[size_t(l)], moe.router().routing(), int64_t(w) * micro_ * S);
      router_acc_[size_t(l)].add(moe.router().routing(), moe.plan());
    }
    model_->backward();
    if (w + 1 < local_units_) {
      const Buffer<float>& g = model_->grads();
      kernels::copy(g.data(), partials_[size_t(w)].data(), int64_t(g.size()));
      if (ep() > 1) {
        const Buffer<float>& e = model_->source_grads();
        kernels::copy(e.data(), expert_partials_[size_t(w)].data(), int64_t(e.size()));
      }
    }
  }
  double v[3] = {sum.loss, sum.ce, sum.z};
  comm_->allreduce(v, 3);
  sum.loss = v[0], sum.ce = v[1], sum.z = v[2];
  sum.tokens = scored;
  return sum;
}

std::string Trainer::check_update() {
  // Testing aids: poison what this step's update wrote, on the last rank only (the decision to
  // roll back must still be taken by every rank).
  std::vector<UpdateGuard::Owned> owned;
  for (auto& r : optimizer_->regions()) owned.push_back({r.own(), r.state_at});
  const parallel::Range own = owned.front().range;
  if (comm_->rank() == comm_->size() - 1 && own.end > own.begin) {
    for (int64_t s : opt_.inject_nan_param_steps)
      if (s == step_) model_->params()[size_t(own.begin)] = std::nanf("");
    for (int64_t s : opt_.inject_inf_state_steps)
      if (s == step_) optimizer_->local_v()[0] = INFINITY;
  }
  return UpdateGuard::check(model_->table(), model_->params().data(), optimizer_->local_m().data(),
                            optimizer_->local_v().data(), owned, *comm_);
}

StepResult Trainer::train_step() {
  const ModelConfig& c = opt_.model;
  StepResult out;
  const kernels::DtypeScope dtype(dtype_);
  data_->next(opt_.batch, tokens_.data(), labels_.data(), seg_.data());
  for (auto& acc : router_acc_) acc.reset(c.num_experts, c.top_k);
  for (int64_t l = 0; l < c.num_layers; ++l) model_->block(l).moe().take_traffic();  // validation
  const LossStats s = forward_backward(/*backward=*/true);
  Buffer<float>& grads = model_->grads();
  for (int64_t bad : opt_.inject_nan_grad_steps)
    if (bad == step_ && is_root()) grads[0] = std::nanf("");

  // The exact sum of every micro-batch's gradient, each rank receiving the tensors it updates;
  // the optimizer all-gathers the updated parameters. Under expert parallelism a micro-batch's
  // gradient is in pieces: the dense tensors where it was computed, each expert shard's part at
  // the shard (one piece per source rank).
  Timer tc;
  const ParamTable& table = model_->table();
  const parallel::Range dense{0, table.expert_begin()},
      experts{table.expert_begin(), table.total()};
  std::vector<parallel::Partial> parts;
  for (int w = 0; w < local_units_; ++w) {
    const bool last = w + 1 == local_units_;
    parts.push_back({last ? grads.data() : partials_[size_t(w)].data(), dense});
    if (ep() == 1) continue;
    const float* by_source =
        last ? model_->source_grads().data() : expert_partials_[size_t(w)].data();
    for (int src = 0; src < ep(); ++src)
      parts.push_back({by_source + src * experts.size(), experts});
  }
  const bool grads_finite = grad_sum_->reduce(parts, units_, *comm_, grads.data());
  out.comm_seconds = tc.seconds();
  // Per rank: the int64 reduce-scatter and the fp32 all-gather each move about the whole region.
  for (auto& r : optimizer_->regions())
    if (r.where.group && r.where.group->size() > 1)
      out.comm_bytes += int64_t(sizeof(int64_t) + sizeof(float)) * r.where.range.size();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const DispatchTraffic a2a = model_->block(l).moe().take_traffic();
    out.all_to_all_seconds += a2a.seconds;
    out.all_to_all_bytes += a2a.bytes;
  }
  out.loss = s;
  out.finite = grads_finite && std::isfinite(s.loss);
  nlohmann::json& m = out.metrics;
  m = {{"step", step_},
       {"loss", s.loss},
       {"ce", s.ce},
       {"z", s.z},
       {"tokens", s.tokens},
       {"world_size", comm_->size()},
       {"dtype", kernels::dtype_name(dtype_)}};
  if (ep() > 1) m["ep"] = ep();
  const LearningRates lr = optimizer_->rates(step_);
  m["lr"] = {{"muonh", lr.muonh}, {"adam", lr.adam}};
  if (out.finite) {
    const GroupNorms gn = group_norms(table, grads.data(), *optimizer_, *comm_);
    // Router health of this step (before the bias moves), over the global batch.
    std::vector<double> sums;
    for (auto& acc : router_acc_) sums.insert(sums.end(), acc.sums(), acc.sums() + acc.size());
    comm_->allreduce(sums.data(), int64_t(sums.size()));
    nlohmann::json routers = nlohmann::json::array();
    size_t at = 0;
    for (auto& acc : router_acc_) {
      std::copy(sums.begin() + long(at), sums.begin() + long(at + size_t(acc.size())), acc.sums());
      at += size_t(acc.size());
      routers.push_back(to_json(acc.finish()));
    }
    m["router"] = routers;
    update_guard_.save(model_->params(), optimizer_->local_m(), optimizer_->local_v());
    optimizer_->step(model_->params().data(), grads.data(), step_);
    out.comm_seconds += optimizer_->last_gather_seconds();
    if (opt_.qb)  // bias for the next step's forward pass, from the whole step's routing
      for (int64_t l = 0; l < c.num_layers; ++l)
        qb_.update_layer(routing_log_[size_t(l)], model_->block(l).moe().router().bias());
    m["grad_norm"] = gn.json();
    if (const std::string bad = check_update(); !bad.empty()) {
      update_guard_.restore(model_->params(), optimizer_->local_m(), optimizer_->local_v());
      out.finite = false;
      m["skipped"] = fmt::format("non-finite update ({}), rolled back", bad);
    } else {
      m["param_norm"] = group_norms(table, model_->params().data(), *optimizer_, *comm_).json();
    }
  } else {
    m["skipped"] = "non-finite loss or gradient, update skipped";
  }
  ++step_;
  return out;
}

double Trainer::validate() {
  if (!valid_) return -1;
  const kernels::DtypeScope dtype(dtype_);
  const nlohmann::json saved = valid_->state();  // every validation reads the same rows
  double ce = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < opt_.eval_batches; ++i) {
    valid_->next(opt_.batch, tokens_.data(), labels_.data(), seg_.data());
    const LossStats s = forward_backward(/*backward=*/false);  // an evaluation: dropless
    ce += s.ce * double(s.tokens);
    n += s.tokens;
  }
  valid_->restore(saved);
  return n > 0 ? ce / double(n) : -1;
}

nlohmann::json Trainer::evaluate_domains(const eval::MacroEvaluator* ev) {
  if (ep() > 1)
    fail("per-domain evaluation of a training run is not supported with --ep > 1 (use marin eval)");
  if (!ev) {
    if (!all_domains_) {
      if (opt_.data.value("kind", "") != "mixture")
        fail("per-domain evaluation during training needs text data (--data with --token-dir)");
      eval::MacroMetric all;
      all.token_dir = opt_.data.at("tokens").get<std::string>();
      const uint64_t hash = opt_.tokenizer.empty() ? 0 : Tokenizer::load(opt_.tokenizer).hash();
      all_domains_ = std::make_unique<eval::MacroEvaluator>(all, hash);
    }
    ev = all_domains_.get();
  }
  const kernels::DtypeScope dtype(dtype_);
  return eval::summary(ev->evaluate(*model_, comm_));
}

nlohmann::json Trainer::evaluate_tasks() {
  if (opt_.tasks.empty()) return nullptr;
  if (!tasks_) {
    auto t = std::make_unique<TrainerTasks>();
    t->tok = Tokenizer::load(opt_.tokenizer);
    std::vector<std::string> specs;
    for (size_t a = 0; a <= opt_.tasks.size();) {
      size_t b = opt_.tasks.find(',', a);
      if (b == std::string::npos) b = opt_.tasks.size();
      if (b > a) specs.push_back(opt_.tasks.substr(a, b - a));
      a = b + 1;
    }
    for (const std::string& f : eval::resolve_task_files(specs, opt_.task_dir))
      t->tasks.push_back(eval::load_task_file(f, {}));
    // The audit: the mixture's training text, when the token directory's corpus is here.
    if (opt_.data.value("kind", "") == "mixture") {
      const std::string corpus =
          TokenManifest::load(opt_.data.at("tokens").get<std::string>()).corpus;
      if (!corpus.empty() && fs::is_directory(corpus)) {
        eval::TrainText text{corpus, eval::mixture_sources(MixtureConfig::from_json(
                                         opt_.data.at("mixture"), run_dir_ + ": data.mixture"))};
        eval::IndexOptions io;
        io.progress = false;
        t->index = eval::build_ngram_index(text, io);
        t->audit_from = corpus;
      }
    }
    tasks_ = std::move(t);
  }
  eval::TaskOptions o;
  o.index = tasks_->index ? &*tasks_->index : nullptr;
  o.progress = false;
  o.group = comm_;
  const kernels::DtypeScope dtype(dtype_);
  const eval::TaskResults r = eval::score_tasks(*model_, tasks_->tok, tasks_->tasks, o);
  if (is_root()) {
    nlohmann::json j = r.to_json({{"model", "marin"},
                                  {"model_args", "run=" + run_dir_},
                                  {"step", step_},
                                  {"batch_size", model_->max_batch()},
                                  {"seq_len", opt_.model.seq_len},
                                  {"tokenizer", opt_.tokenizer},
                                  {"tokenizer_hash", hex64(tasks_->tok.hash())}});
    if (tasks_->index) j["marin"]["audit"]["from"] = tasks_->audit_from;
    fs::create_directories(run_dir_ + "/tasks");
    write_file_atomic(fmt::format("{}/tasks/step-{:08d}.json", run_dir_, step_), j.dump(2) + "\n");
  }
  return r.summary();
}

TrainResult Trainer::run() {
  TrainResult res;
  g_signal = 0;
  std::vector<void (*)(int)> old_handlers;
  for (int sig : kStopSignals) old_handlers.push_back(std::signal(sig, on_signal));
  auto restore_handlers = [&] {
    for (size_t i = 0; i < old_handlers.size(); ++i) std::signal(kStopSignals[i], old_handlers[i]);
  };
  if (is_root())
    write_file_atomic(run_dir_ + "/run.json",
                      nlohmann::json({{"options", opt_.to_json()},
                                      {"lineage", lineage_},
                                      {"world_size", comm_->size()},
                                      {"dtype", kernels::dtype_name(dtype_)},
                                      {"comm", comm_->backend()}})
                              .dump(2) +
                          "\n");
  const bool tty = is_root() && isatty(fileno(stderr));
  const ModelConfig& c = opt_.model;
  const int64_t tokens_per_step = int64_t(opt_.batch) * c.seq_len;
  Timer wall;
  int64_t first_step = step_;
  int bad_in_row = 0;
  while (step_ < opt_.steps) {
    Timer t;
    StepResult r = train_step();
    nlohmann::json& m = r.metrics;
    if (r.finite) {
      bad_in_row = 0;
    } else {
      ++bad_in_row;
      if (is_root())
        fmt::print(stderr, "\nmarin: step {}: {} ({} in a row)\n", step_ - 1,
                   m.value("skipped", std::string("non-finite")), bad_in_row);
    }
    const double dt = t.seconds();
    m["step_seconds"] = dt;
    m["tokens_per_second"] = double(tokens_per_step) / dt;
    if (comm_->size() > 1) m["comm"] = {{"seconds", r.comm_seconds}, {"bytes", r.comm_bytes}};
    if (ep() > 1)
      m["comm"]["all_to_all"] = {{"seconds", r.all_to_all_seconds}, {"bytes", r.all_to_all_bytes}};
    res.last_loss = r.loss.loss;
    if (bad_in_row >= opt_.max_bad_steps) {
      write_metrics(m);
      restore_handlers();
      auto last = latest_checkpoint(run_dir_);
      fail("{} consecutive non-finite steps (last at step {}): stopping; {}", bad_in_row, step_ - 1,
           !last                            ? std::string("no checkpoint was written yet")
           : checkpoint_known_finite(*last) ? "the last good checkpoint is " + *last
                                            : "the newest checkpoint " + *last +
                                                  " is not known to be finite (written before "
                                                  "finite checks)");
    }
    const bool eval_now =
        valid_ && ((opt_.eval_every > 0 && step_ % opt_.eval_every == 0) || step_ == opt_.steps);
    if (eval_now) m["valid_ce"] = validate();
    if (opt_.eval_domains_every > 0 &&
        (step_ % opt_.eval_domains_every == 0 || step_ == opt_.steps))
      m["eval"] = evaluate_domains();
    if (!opt_.tasks.empty() &&
        ((opt_.tasks_every > 0 && step_ % opt_.tasks_every == 0) || step_ == opt_.steps))
      m["tasks"] = evaluate_tasks();
    for (auto& h : hooks_) h->after_step(*this, m);
    // What this step measured, from the loop or a hook.
    if (m.contains("valid_ce")) res.last_valid_ce = m["valid_ce"].get<double>();
    if (m.contains("eval")) res.last_eval = m["eval"];
    if (m.contains("tasks")) res.last_tasks = m["tasks"];
    write_metrics(m);
    for (auto& h : hooks_) h->after_metrics(*this);
    const double elapsed = wall.seconds();
    const double rate = double(step_ - first_step) / elapsed;
    const std::string valid_note =
        m.contains("valid_ce") ? fmt::format(" | valid {:.4f}", res.last_valid_ce) : "";
    if (tty) {
      fmt::print(stderr, "\rstep {}/{} | loss {:.4f} | {:.0f} tok/s | {} elapsed | ETA {}{}   ",
                 step_, opt_.steps, r.loss.loss, double(tokens_per_step) / dt,
                 format_duration(elapsed), format_duration(double(opt_.steps - step_) / rate),
                 valid_note);
    } else if (is_root() && (step_ % 10 == 0 || step_ == opt_.steps || !valid_note.empty())) {
      fmt::print(stderr, "step {}/{} loss {:.4f} {:.0f} tok/s{}\n", step_, opt_.steps, r.loss.loss,
                 double(tokens_per_step) / dt, valid_note);
    }
    // Stop together: a signal may reach only some ranks, and each rank's clock differs.
    int stop[3] = {g_signal.load(), opt_.time_limit_s > 0 && elapsed >= opt_.time_limit_s,
                   !metrics_error_.empty()};
    comm_->allreduce(stop, 3, parallel::Op::Max);
    if (stop[0] || stop[1] || stop[2]) {
      res.last_checkpoint = save_checkpoint();
      res.interrupted = true;
      if (stop[2]) {
        std::string why = metrics_error_;  // rank 0's, for every rank's message
        comm_->broadcast(why);
        restore_handlers();
        fail(
            "{}; stopped with a checkpoint ({} at step {}): make room or fix the file, then "
            "--resume",
            why, res.last_checkpoint, step_);
      }
      if (is_root())
        fmt::print(stderr, "\n{}: saved {} at step {}\n",
                   stop[0] == SIGINT ? std::string("interrupted")
                   : stop[0]         ? fmt::format("stopped by signal {}", stop[0])
                                     : std::string("time limit reached"),
                   res.last_checkpoint, step_);
      break;
    }
    if ((opt_.ckpt_every > 0 && step_ % opt_.ckpt_every == 0) ||
        (opt_.keep_every > 0 && step_ % opt_.keep_every == 0) || step_ == opt_.steps)
      res.last_checkpoint = save_checkpoint();
  }
  if (tty) fmt::print(stderr, "\n");
  for (auto& h : hooks_) h->at_end(*this, res);
  restore_handlers();
  res.steps_done = step_;
  return res;
}

}  // namespace marin
