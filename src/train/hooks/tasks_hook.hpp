#pragma once
// Downstream tasks during training (--tasks, --tasks-every N): the tasks scored with the model as
// it is, forward passes split over the ranks, every N steps (0: never before the end) and at the
// end, into the step's "tasks" (TaskResults::summary); rank 0 also writes the harness-layout
// results to RUN/tasks/step-N.json.
#include <memory>
#include <nlohmann/json.hpp>

#include "train/train_hook.hpp"
#include "train/train_options.hpp"

namespace marin {

struct TrainerTasks;  // the tasks, tokenizer and audit index (tasks_hook.cpp)

class TasksHook final : public TrainHook {
 public:
  TasksHook();
  ~TasksHook() override;
  // Refuses options it cannot serve (naming them).
  static void check(const TrainOptions& o);
  static bool due(const TrainOptions& o, int64_t step) {
    return !o.tasks.empty() && due_at(step, o.tasks_every, o.steps);
  }
  // The scores of the trainer's model now (collective); null without --tasks. The tasks,
  // tokenizer and the audit's n-gram index (of the mixture's training text, when the token
  // manifest's corpus exists here) are loaded on the first call.
  nlohmann::json evaluate(Trainer& t);
  void after_step(Trainer& t, nlohmann::json& metrics) override;

 private:
  std::unique_ptr<TrainerTasks> tasks_;
};

}  // namespace marin
