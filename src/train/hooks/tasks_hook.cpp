#include "train/hooks/tasks_hook.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <optional>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "data/mixture.hpp"
#include "data/shards.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "eval/macro_metric.hpp"
#include "eval/tasks/task_items.hpp"
#include "eval/tasks/task_scorer.hpp"
#include "train/trainer.hpp"

namespace marin {
namespace fs = std::filesystem;

struct TrainerTasks {
  std::vector<eval::TaskItems> tasks;
  Tokenizer tok;
  std::optional<eval::NgramIndex> index;
  std::string audit_from;  // what the index was built from ("" when not audited)
};

namespace {

std::unique_ptr<TrainerTasks> load_tasks(const TrainOptions& o, const std::string& run_dir) {
  auto t = std::make_unique<TrainerTasks>();
  t->tok = Tokenizer::load(o.tokenizer);
  std::vector<std::string> specs;
  for (size_t a = 0; a <= o.tasks.size();) {
    size_t b = o.tasks.find(',', a);
    if (b == std::string::npos) b = o.tasks.size();
    if (b > a) specs.push_back(o.tasks.substr(a, b - a));
    a = b + 1;
  }
  for (const std::string& f : eval::resolve_task_files(specs, o.task_dir))
    t->tasks.push_back(eval::load_task_file(f, {}));
  // The audit: the mixture's training text, when the token directory's corpus is here.
  if (o.data.value("kind", "") == "mixture") {
    const std::string corpus = TokenManifest::load(o.data.at("tokens").get<std::string>()).corpus;
    if (!corpus.empty() && fs::is_directory(corpus)) {
      eval::TrainText text{corpus, eval::mixture_sources(MixtureConfig::from_json(
                                       o.data.at("mixture"), run_dir + ": data.mixture"))};
      eval::IndexOptions io;
      io.progress = false;
      t->index = eval::build_ngram_index(text, io);
      t->audit_from = corpus;
    }
  }
  return t;
}

}  // namespace

TasksHook::TasksHook() = default;
TasksHook::~TasksHook() = default;

void TasksHook::check(const TrainOptions& o) {
  if (o.ep > 1 && !o.tasks.empty())
    fail(
        "--tasks is not supported with --ep > 1 (expert-parallel forwards run in lockstep): "
        "score a checkpoint with `marin eval --tasks` instead");
  if (o.tasks_every > 0 && o.tasks.empty())
    fail("--tasks-every {} needs --tasks (the downstream tasks to score)", o.tasks_every);
  if (!o.tasks.empty() && o.tokenizer.empty())
    fail("--tasks needs the model's tokenizer (--tokenizer FILE)");
}

nlohmann::json TasksHook::evaluate(Trainer& t) {
  const TrainOptions& opt = t.options();
  if (opt.tasks.empty()) return nullptr;
  if (!tasks_) tasks_ = load_tasks(opt, t.run_dir());
  eval::TaskOptions o;
  o.index = tasks_->index ? &*tasks_->index : nullptr;
  o.progress = false;
  o.group = &t.comm();
  const kernels::DtypeScope dtype(t.dtype());
  const WholeParams whole = t.engine().whole_params();  // each rank runs its own items
  const eval::TaskResults r = eval::score_tasks(t.model(), tasks_->tok, tasks_->tasks, o);
  if (t.is_root()) {
    nlohmann::json j = r.to_json({{"model", "marin"},
                                  {"model_args", "run=" + t.run_dir()},
                                  {"step", t.step()},
                                  {"batch_size", t.model().max_batch()},
                                  {"seq_len", opt.model.seq_len},
                                  {"tokenizer", opt.tokenizer},
                                  {"tokenizer_hash", hex64(tasks_->tok.hash())}});
    if (tasks_->index) j["marin"]["audit"]["from"] = tasks_->audit_from;
    fs::create_directories(t.run_dir() + "/tasks");
    write_file_atomic(fmt::format("{}/tasks/step-{:08d}.json", t.run_dir(), t.step()),
                      j.dump(2) + "\n");
  }
  return r.summary();
}

void TasksHook::after_step(Trainer& t, nlohmann::json& m) {
  if (due(t.options(), t.step())) m["tasks"] = evaluate(t);
}

}  // namespace marin
