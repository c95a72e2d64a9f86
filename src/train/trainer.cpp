#include "train/trainer.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <csignal>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/limits.hpp"
#include "core/progress.hpp"
#include "core/timer.hpp"
#include "data/batch_factory.hpp"
#include "kernels/threads.hpp"
#include "parallel/agreement.hpp"
#include "train/checkpoint.hpp"
#include "train/hooks/domain_eval_hook.hpp"
#include "train/hooks/tasks_hook.hpp"
#include "train/hooks/validation_hook.hpp"

namespace marin {
namespace {

// SIGINT (Ctrl-C), SIGTERM (Slurm, Kubernetes, mpirun forwarding) and SIGUSR1 (Slurm's warning
// before the time limit) all mean: save a checkpoint at the end of this step and stop.
std::atomic<int> g_signal{0};
void on_signal(int sig) {
  g_signal = sig;
}
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};

// The stop signals caught while it lives (run()), the previous handlers restored after.
class StopSignals {
 public:
  StopSignals() {
    g_signal = 0;
    for (int sig : kStopSignals) old_.push_back(std::signal(sig, on_signal));
  }
  ~StopSignals() {
    for (size_t i = 0; i < old_.size(); ++i) std::signal(kStopSignals[i], old_[i]);
  }

 private:
  std::vector<void (*)(int)> old_;
};

// The progress of the steps on stderr (rank 0; core/progress.hpp): redrawn in place on a
// terminal, else a plain line every --progress-every seconds, at each validation and at the end.
struct StepProgress {
  Progress bar;
  int64_t tokens_per_step = 0;
  StepProgress(bool root, int64_t first_step, int64_t steps, int64_t tokens)
      : bar(root ? uint64_t(steps) : 0, "train step", "", uint64_t(first_step)),
        tokens_per_step(tokens) {}
  void print(int64_t step, double loss, double dt, const std::string& valid) {
    bar.set_detail(fmt::format(" | {} tokens | loss {:.4f} | {:.0f} tok/s{}",
                               step * tokens_per_step, loss, double(tokens_per_step) / dt, valid));
    bar.update(uint64_t(step));
    if (!valid.empty()) bar.line_now();  // a validation always gets its line
  }
};

}  // namespace

void Trainer::setup(const TrainOptions& o, const std::string& run_dir, parallel::Comm* comm,
                    bool fresh) {
  opt_ = o;
  run_dir_ = run_dir;
  comm_ = comm ? comm : &parallel::world();
  // Before the first collective that depends on an option: ranks launched with different
  // options end here, naming them, instead of waiting for each other forever.
  parallel::require_agreement(*comm_, o.to_json(), "options");
  StepEngine::check_shape(opt_, comm_->size());  // fills the micro-batch (part of the run)
  // The run directory is this run's until it ends (run_lock.hpp); rank 0 is its one writer.
  if (comm_->is_root() && !lock_) lock_ = claim_run_dir(run_dir, fresh, o.overwrite);
  comm_->barrier();
  DomainEvalHook::check(opt_);
  TasksHook::check(opt_);
  engine_ = std::make_unique<StepEngine>(opt_, *comm_);
  store_ = std::make_unique<CheckpointStore>(run_dir_);
  metrics_ = std::make_unique<MetricsLog>(run_dir_, comm_->is_root());
  open_data();
  // The Trainer's own evaluations, before any hook a caller adds (which may read their fields).
  auto validation = std::make_unique<ValidationHook>(make_batch_source(o.valid, data_options(o)));
  auto domains = std::make_unique<DomainEvalHook>();
  auto tasks = std::make_unique<TasksHook>();
  validation_ = validation.get(), domains_ = domains.get(), tasks_ = tasks.get();
  hooks_.push_back(std::move(validation));
  hooks_.push_back(std::move(domains));
  hooks_.push_back(std::move(tasks));
}

void Trainer::open_data() {
  const TrainOptions& o = opt_;
  data_ = make_batch_source(o.data, data_options(o));
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
  engine_->start_prefault();  // beside the initialisation below
  if (!init_dir.empty()) {
    Buffer<float> full(size_t(engine_->full_table().total()));
    load_params(init_dir, engine_->full_table(), full.data());
    engine_->load_full_state(full.data(), nullptr, nullptr);
    lineage_ = {{"init", init_dir}};
  } else {
    engine_->init(opts.seed);
  }
}

void Trainer::start_from(const ResumePoint& p) {
  if (is_sharded_checkpoint(p.dir)) {
    // Each rank reads only its part, so a damaged shard is first one rank's error: it becomes
    // every rank's, and the resume tries an older checkpoint on all of them alike.
    std::string error;
    try {
      engine_->load_sharded_state(p.dir);
    } catch (const Error& e) {
      if (comm_->size() == 1) throw;
      error = e.what();
    }
    parallel::agree_on_error(*comm_, error, "resume from " + p.dir);
  } else {
    Buffer<float> params, m, v;
    CheckpointStore::load(p.dir, engine_->full_table(), params, m, v);
    engine_->load_full_state(params.data(), m.data(), v.data());
  }
  if (p.restore_data) {
    try {
      data_->restore(p.state.data_state);
    } catch (const Error& e) {
      fail("{}/state.json: data: {}", p.dir, e.what());
    }
  }
  step_ = p.state.step;
  lineage_ = p.state.lineage;
  engine_->start_prefault();  // after the checkpoint's temporaries are gone
}

std::unique_ptr<Trainer> Trainer::resume(const std::string& run_dir, parallel::Comm* comm,
                                         const ResumeChanges& changes) {
  const CheckpointStore store(run_dir);
  store.require_checkpoint();  // before the lock: a directory without one is not a run to resume
  parallel::Comm& c = comm ? *comm : parallel::world();
  // One lock for every attempt (a failed attempt's trainer must not release it).
  std::shared_ptr<RunLock> lock;
  if (c.is_root()) lock = claim_run_dir(run_dir, /*fresh=*/false, /*overwrite=*/false);
  std::unique_ptr<Trainer> t;
  ResumeChanges at_hand = changes;
  at_hand.ranks = c.size();  // the parallel layout is re-derived for the ranks at hand
  store.resume(at_hand, c.is_root(), [&](const ResumePoint& p) {
    std::unique_ptr<Trainer> next(new Trainer());
    next->lock_ = lock;
    next->setup(p.state.options, run_dir, comm, /*fresh=*/false);
    next->start_from(p);
    if (next->is_root()) {
      MetricsLog::truncate(run_dir, p.state.step);
      fmt::print(stderr, "resuming {} from {} (step {}, {} rank{}, {})\n", run_dir, p.dir,
                 p.state.step, c.size(), c.size() > 1 ? "s" : "", p.threads_note);
      for (const std::string& w : p.warnings) fmt::print(stderr, "marin: warning: {}\n", w);
    }
    t = std::move(next);
  });
  return t;
}

std::unique_ptr<Trainer> Trainer::fork(const std::string& ckpt_dir, const std::string& run_dir,
                                       const TrainOptions& changed, parallel::Comm* comm) {
  const ResumePoint p = CheckpointStore::fork_point(ckpt_dir, changed);
  std::unique_ptr<Trainer> t(new Trainer());
  t->setup(p.state.options, run_dir, comm);
  t->start_from(p);
  if (t->is_root()) write_file_atomic(run_dir + "/lineage.json", t->lineage_.dump(2) + "\n");
  return t;
}

Trainer::~Trainer() = default;

std::string Trainer::save_checkpoint() {
  const RunState st{step_, opt_, data_->state(), lineage_, kernels::compute_threads()};
  const bool sharded =
      opt_.ckpt_format == "sharded" || (opt_.ckpt_format == "auto" && comm_->size() > 1);
  if (sharded)  // collective, every rank writing its own part
    return store_->write_sharded(st, engine_->full_table(), engine_->state_pieces(),
                                 {comm_->size(), engine_->ep()}, *comm_, opt_.keep_every);
  const FullState full = engine_->gather_full_state();  // collective
  std::string dir;
  if (is_root())
    dir = store_->write(st, engine_->full_table(), full.params, full.m, full.v, opt_.keep_every);
  comm_->broadcast(dir);  // also: no rank goes on before the checkpoint is published
  return dir;
}

StepResult Trainer::train_step() {
  StepResult r = engine_->step(*data_, step_);
  ++step_;
  return r;
}

double Trainer::validate() {
  return validation_->validate(*engine_, opt_);
}

nlohmann::json Trainer::evaluate_domains(const eval::MacroEvaluator* ev) {
  return domains_->evaluate(*this, ev);
}

nlohmann::json Trainer::evaluate_tasks() {
  return tasks_->evaluate(*this);
}

void Trainer::finish_step(StepResult& r, double dt, TrainResult& res) {
  nlohmann::json& m = r.metrics;
  if (r.finite) {
    bad_in_row_ = 0;
  } else {
    ++bad_in_row_;
    if (is_root())
      fmt::print(stderr, "\nmarin: step {}: {} ({} in a row)\n", step_,
                 m.value("skipped", std::string("non-finite")), bad_in_row_);
  }
  m["step_seconds"] = dt;
  m["tokens_per_second"] = double(int64_t(opt_.batch) * opt_.model.seq_len) / dt;
  // The largest peak resident memory of any rank so far (what --shard-params shrinks).
  m["peak_rss_bytes"] = comm_->allreduce(peak_rss_bytes(), parallel::Op::Max);
  if (comm_->size() > 1) {
    m["comm"] = {{"seconds", r.comm_seconds}, {"bytes", r.comm_bytes}};
    if (r.comm_overlapped) m["comm"]["overlapped"] = true;
  }
  if (engine_->ep() > 1)
    m["comm"]["all_to_all"] = {{"seconds", r.all_to_all_seconds}, {"bytes", r.all_to_all_bytes}};
  res.last_loss = r.loss.loss;
  if (bad_in_row_ >= opt_.max_bad_steps) {
    write_metrics(m);
    auto last = store_->latest();
    fail("{} consecutive non-finite steps (last at step {}): stopping; {}", bad_in_row_, step_,
         !last                            ? std::string("no checkpoint was written yet")
         : checkpoint_known_finite(*last) ? "the last good checkpoint is " + *last
                                          : "the newest checkpoint " + *last +
                                                " is not known to be finite (written before "
                                                "finite checks)");
  }
  for (auto& h : hooks_) h->after_step(*this, m);
  // What this step measured, from the loop's hooks or a caller's.
  if (m.contains("valid_ce")) res.last_valid_ce = m["valid_ce"].get<double>();
  if (m.contains("eval")) res.last_eval = m["eval"];
  if (m.contains("tasks")) res.last_tasks = m["tasks"];
  write_metrics(m);
  for (auto& h : hooks_) h->after_metrics(*this);
}

bool Trainer::stop_if_asked(bool out_of_time, TrainResult& res) {
  // Stop together: a signal may reach only some ranks, and each rank's clock differs.
  int stop[3] = {g_signal.load(), out_of_time, !metrics_->error().empty()};
  comm_->allreduce(stop, 3, parallel::Op::Max);
  if (!stop[0] && !stop[1] && !stop[2]) return false;
  res.last_checkpoint = save_checkpoint();
  res.interrupted = true;
  if (stop[2]) {
    std::string why = metrics_->error();  // rank 0's, for every rank's message
    comm_->broadcast(why);
    fail("{}; stopped with a checkpoint ({} at step {}): make room or fix the file, then --resume",
         why, res.last_checkpoint, step_);
  }
  if (is_root())
    fmt::print(stderr, "\n{}: saved {} at step {}\n",
               stop[0] == SIGINT ? std::string("interrupted")
               : stop[0]         ? fmt::format("stopped by signal {}", stop[0])
                                 : std::string("time limit reached"),
               res.last_checkpoint, step_);
  return true;
}

TrainResult Trainer::run() {
  TrainResult res;
  const StopSignals signals;
  if (is_root())
    write_file_atomic(run_dir_ + "/run.json",
                      nlohmann::json({{"options", opt_.to_json()},
                                      {"lineage", lineage_},
                                      {"world_size", comm_->size()},
                                      {"dtype", kernels::dtype_name(dtype())},
                                      {"threads", kernels::compute_threads()},
                                      {"comm", comm_->backend()}})
                              .dump(2) +
                          "\n");
  StepProgress progress(is_root(), step_, opt_.steps, int64_t(opt_.batch) * opt_.model.seq_len);
  TimeLimit time_limit(opt_.time_limit_s);
  Timer wall;
  bad_in_row_ = 0;
  while (step_ < opt_.steps) {
    Timer t;
    StepResult r = train_step();
    finish_step(r, t.seconds(), res);
    progress.print(
        step_, r.loss.loss, r.metrics["step_seconds"].get<double>(),
        r.metrics.contains("valid_ce") ? fmt::format(" | valid {:.4f}", res.last_valid_ce) : "");
    if (stop_if_asked(time_limit.step_done(wall.seconds()), res)) break;
    if (due_at(step_, opt_.ckpt_every, opt_.steps) || due_at(step_, opt_.keep_every, 0, false))
      res.last_checkpoint = save_checkpoint();
  }
  progress.bar.finish();
  for (auto& h : hooks_) h->at_end(*this, res);
  res.steps_done = step_;
  return res;
}

}  // namespace marin
