#pragma once
// Per-domain evaluation during training (--eval-domains-every N): marin eval's macro loss / BPB
// over every validation domain of the run's token directory, every N steps and at the end, into
// the step's "eval".
#include <memory>
#include <nlohmann/json.hpp>

#include "train/train_hook.hpp"
#include "train/train_options.hpp"

namespace marin {
namespace eval {
class MacroEvaluator;
}  // namespace eval

class DomainEvalHook final : public TrainHook {
 public:
  DomainEvalHook();
  ~DomainEvalHook() override;
  // Refuses options it cannot serve (naming them).
  static void check(const TrainOptions& o);
  static bool due(const TrainOptions& o, int64_t step) {
    return due_at(step, o.eval_domains_every, o.steps, o.eval_domains_every > 0);
  }
  // eval::summary of the trainer's model with `ev` (documents split over the ranks), or over
  // every domain of the run's token directory when null (built on the first call).
  nlohmann::json evaluate(Trainer& t, const eval::MacroEvaluator* ev);
  void after_step(Trainer& t, nlohmann::json& metrics) override;

 private:
  std::unique_ptr<eval::MacroEvaluator> all_domains_;
};

}  // namespace marin
