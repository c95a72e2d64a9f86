// The training loop's hooks (train/train_hook.hpp, train/hooks/): each evaluation's cadence, and
// a Trainer's run calling every hook at its cadence, its own evaluations before a caller's hook.
#include <gtest/gtest.h>

#include <set>

#include "cli_util.hpp"
#include "train/hooks/domain_eval_hook.hpp"
#include "train/hooks/tasks_hook.hpp"
#include "train/hooks/validation_hook.hpp"
#include "train/trainer.hpp"

using marin::testing::TempDir;

namespace {

std::set<int64_t> due_steps(bool (*due)(const marin::TrainOptions&, int64_t),
                            const marin::TrainOptions& o) {
  std::set<int64_t> out;
  for (int64_t s = 1; s <= o.steps; ++s)
    if (due(o, s)) out.insert(s);
  return out;
}

// Records what the loop showed it.
struct Recorder final : marin::TrainHook {
  std::set<int64_t> valid_at, metrics_at;
  int ends = 0;
  void after_step(marin::Trainer& t, nlohmann::json& m) override {
    if (m.contains("valid_ce")) valid_at.insert(t.step());
    m["recorded"] = true;
  }
  void after_metrics(marin::Trainer& t) override { metrics_at.insert(t.step()); }
  void at_end(marin::Trainer&, marin::TrainResult&) override { ++ends; }
};

}  // namespace

TEST(TrainHooks, EachEvaluationAtItsCadence) {
  marin::TrainOptions o;
  o.steps = 10;
  o.eval_every = 4;
  EXPECT_EQ(due_steps(marin::ValidationHook::due, o), (std::set<int64_t>{4, 8, 10}));
  o.eval_every = 0;  // at the end only
  EXPECT_EQ(due_steps(marin::ValidationHook::due, o), (std::set<int64_t>{10}));
  EXPECT_TRUE(due_steps(marin::DomainEvalHook::due, o).empty());  // off
  o.eval_domains_every = 5;
  EXPECT_EQ(due_steps(marin::DomainEvalHook::due, o), (std::set<int64_t>{5, 10}));
  EXPECT_TRUE(due_steps(marin::TasksHook::due, o).empty());  // no --tasks
  o.tasks = "arc_easy";
  EXPECT_EQ(due_steps(marin::TasksHook::due, o), (std::set<int64_t>{10}));
  o.tasks_every = 3;
  EXPECT_EQ(due_steps(marin::TasksHook::due, o), (std::set<int64_t>{3, 6, 9, 10}));
}

TEST(TrainHooks, ATrainerCallsThemAtTheirCadence) {
  TempDir tmp("train-hooks");
  marin::testing::write_rows(tmp.str("rows.bin"), 48);
  marin::testing::write_rows(tmp.str("valid.bin"), 8, 64, 512, 7);
  marin::TrainOptions o;
  o.model = marin::ModelConfig::preset("tiny");
  o.batch = 4;
  o.steps = 5;
  o.eval_every = 2;
  o.eval_batches = 1;
  o.data = {{"kind", "rows"}, {"path", tmp.str("rows.bin")}};
  o.valid = {{"kind", "rows"}, {"path", tmp.str("valid.bin")}};
  marin::Trainer t(o, tmp.str("run"));
  auto rec = std::make_unique<Recorder>();
  Recorder& r = *rec;
  t.add_hook(std::move(rec));
  const marin::TrainResult res = t.run();
  EXPECT_EQ(res.steps_done, 5);
  EXPECT_EQ(r.valid_at, (std::set<int64_t>{2, 4, 5}));  // the validation hook ran first
  EXPECT_EQ(r.metrics_at, (std::set<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(r.ends, 1);
  EXPECT_GT(res.last_valid_ce, 0);
  const auto lines = marin::testing::metrics(tmp.str("run"));
  ASSERT_EQ(lines.size(), 5u);
  for (const auto& m : lines) EXPECT_TRUE(m.value("recorded", false)) << m.dump();
  EXPECT_EQ(t.validate(), t.validate());  // every validation reads the same rows
}
