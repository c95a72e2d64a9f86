#pragma once
// Validation during training: the mean CE over eval_batches global batches of the validation
// source (dropless), every eval_every steps and at the end, into the step's "valid_ce".
#include <memory>

#include "data/batch_source.hpp"
#include "train/train_hook.hpp"
#include "train/train_options.hpp"

namespace marin {

class StepEngine;

class ValidationHook final : public TrainHook {
 public:
  explicit ValidationHook(std::unique_ptr<BatchSource> valid) : valid_(std::move(valid)) {}
  // The steps it validates at (with validation data).
  static bool due(const TrainOptions& o, int64_t step) {
    return due_at(step, o.eval_every, o.steps);
  }
  // Mean validation CE of the engine's model over o.eval_batches global batches; -1 without
  // validation data. Every call reads the same rows.
  double validate(StepEngine& engine, const TrainOptions& o);
  void after_step(Trainer& t, nlohmann::json& metrics) override;

 private:
  std::unique_ptr<BatchSource> valid_;
};

}  // namespace marin
