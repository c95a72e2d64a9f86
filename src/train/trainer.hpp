#pragma once
// The training loop: batch → forward → backward → (finite?) → optimizer → QB bias → metrics,
// with periodic validation and checkpoints, bit-exact resume, forks, and fault handling
// (non-finite steps are skipped and reported; SIGINT saves and exits cleanly).
#include <memory>
#include <string>

#include "data/batch_source.hpp"
#include "model/model.hpp"
#include "model/moe/qb_balance.hpp"
#include "optim/optimizer.hpp"
#include "train/run_checkpoint.hpp"

namespace marin {
namespace eval {
class MacroEvaluator;
struct MacroMetric;
}  // namespace eval

struct TrainResult {
  int64_t steps_done = 0;
  double last_loss = 0;
  double last_valid_ce = -1;
  nlohmann::json last_eval;  // the last per-domain evaluation (eval::summary), null if none
  bool interrupted = false;
  std::string last_checkpoint;
};

class Trainer {
 public:
  // A new run in run_dir (created), optionally starting from a model checkpoint (`init_dir`).
  Trainer(const TrainOptions& o, const std::string& run_dir, const std::string& init_dir = "");
  // Continues the run in run_dir from its newest complete checkpoint.
  static std::unique_ptr<Trainer> resume(const std::string& run_dir);
  // A new run in run_dir that starts from a checkpoint with some options changed.
  static std::unique_ptr<Trainer> fork(const std::string& ckpt_dir, const std::string& run_dir,
                                       const TrainOptions& changed);
  ~Trainer();

  TrainResult run();
  Model<float>& model() { return *model_; }
  int64_t step() const { return step_; }

 private:
  Trainer() = default;
  void setup(const TrainOptions& o, const std::string& run_dir);
  std::string save_checkpoint();
  void write_metrics(const nlohmann::json& j);
  double validate();
  // Macro loss / BPB over the validation domains (eval::summary): with the metric of a forecast
  // when one is tracked (same documents, budget and audit), else every domain of the run's
  // token directory.
  nlohmann::json evaluate_domains();
  void use_macro_metric(const eval::MacroMetric& metric);

  TrainOptions opt_;
  std::string run_dir_;
  std::unique_ptr<Model<float>> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<BatchSource> data_, valid_;
  QBBalancer qb_;
  int64_t step_ = 0;
  nlohmann::json lineage_;
  std::vector<int32_t> tokens_, labels_, seg_;
  FILE* metrics_ = nullptr;
  std::unique_ptr<eval::MacroEvaluator> macro_;
};

// Builds a batch source from a data spec ({"kind": "rows", "path": ...}, ...).
// {"kind": "rows", "path"}, {"kind": "mixture", "tokens": TOKDIR, "mixture": {...}} or
// {"kind": "valid", "tokens": TOKDIR, "domains": [...]}; null → nullptr.
std::unique_ptr<BatchSource> make_batch_source(const nlohmann::json& spec, const TrainOptions& o);

}  // namespace marin
