#include "train/hooks/validation_hook.hpp"

#include "train/step_engine.hpp"
#include "train/trainer.hpp"

namespace marin {

double ValidationHook::validate(StepEngine& engine, const TrainOptions& o) {
  if (!valid_) return -1;
  const nlohmann::json saved = valid_->state();  // every validation reads the same rows
  double ce = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < o.eval_batches; ++i) {
    const LossStats s = engine.evaluate(*valid_);
    ce += s.ce * double(s.tokens);
    n += s.tokens;
  }
  valid_->restore(saved);
  return n > 0 ? ce / double(n) : -1;
}

void ValidationHook::after_step(Trainer& t, nlohmann::json& m) {
  if (valid_ && due(t.options(), t.step())) m["valid_ce"] = validate(t.engine(), t.options());
}

}  // namespace marin
