// The step engine on its own (train/step_engine.hpp): a tiny model's steps without a Trainer,
// the same bits as the Trainer's, a loss that falls, and the two rollbacks (a non-finite
// gradient skips the update; a non-finite update is undone).
#include <gtest/gtest.h>

#include <cstring>

#include "cli_util.hpp"
#include "data/batch_factory.hpp"
#include "train/step_engine.hpp"
#include "train/trainer.hpp"

using marin::testing::TempDir;
using marin::testing::write_rows;

namespace {

marin::TrainOptions tiny_options(const TempDir& tmp) {
  write_rows(tmp.str("rows.bin"), 64);
  marin::TrainOptions o;
  o.model = marin::ModelConfig::preset("tiny");
  o.batch = 4;
  o.steps = 20;
  o.seed = 3;
  o.data = {{"kind", "rows"}, {"path", tmp.str("rows.bin")}};
  o.resolve_hparams();
  return o;
}

std::unique_ptr<marin::BatchSource> source(const marin::TrainOptions& o) {
  return marin::make_batch_source(o.data, marin::data_options(o));
}

bool same_params(marin::Model<float>& a, marin::Model<float>& b) {
  return a.params().size() == b.params().size() &&
         std::memcmp(a.params().data(), b.params().data(), a.params().size() * sizeof(float)) == 0;
}

}  // namespace

TEST(StepEngine, StepsAreTheTrainersBitForBit) {
  TempDir tmp("step-engine-same");
  const marin::TrainOptions o = tiny_options(tmp);
  marin::Trainer trainer(o, tmp.str("run"));
  marin::StepEngine engine(o, marin::parallel::world());
  engine.init(o.seed);
  auto data = source(o);
  ASSERT_TRUE(same_params(engine.model(), trainer.model()));
  for (int64_t s = 0; s < 3; ++s) {
    const marin::StepResult a = trainer.train_step();
    const marin::StepResult b = engine.step(*data, s);
    EXPECT_EQ(a.loss.loss, b.loss.loss) << "step " << s;
    EXPECT_EQ(a.metrics.dump(), b.metrics.dump()) << "step " << s;
  }
  EXPECT_EQ(trainer.step(), 3);
  EXPECT_TRUE(same_params(engine.model(), trainer.model()));
}

TEST(StepEngine, LossFallsOnALearnablePattern) {
  TempDir tmp("step-engine-learns");
  const marin::TrainOptions o = tiny_options(tmp);
  marin::StepEngine engine(o, marin::parallel::world());
  engine.init(o.seed);
  auto data = source(o);
  double first = 0, last = 0;
  for (int64_t s = 0; s < o.steps; ++s) {
    const marin::StepResult r = engine.step(*data, s);
    ASSERT_TRUE(r.finite) << r.metrics.dump();
    (s == 0 ? first : last) = r.loss.loss;
  }
  EXPECT_LT(last, first);
}

TEST(StepEngine, NonFiniteGradientSkipsAndNonFiniteUpdateRollsBack) {
  TempDir tmp("step-engine-rollback");
  marin::TrainOptions o = tiny_options(tmp);
  o.inject_nan_grad_steps = {1};
  o.inject_nan_param_steps = {2};
  marin::StepEngine engine(o, marin::parallel::world());
  engine.init(o.seed);
  auto data = source(o);
  ASSERT_TRUE(engine.step(*data, 0).finite);
  for (int64_t s : {1, 2}) {
    const marin::Buffer<float> before = engine.model().params();
    const marin::StepResult r = engine.step(*data, s);
    EXPECT_FALSE(r.finite) << "step " << s;
    EXPECT_NE(r.metrics.value("skipped", "").find(s == 1 ? "update skipped" : "rolled back"),
              std::string::npos)
        << r.metrics.dump();
    EXPECT_EQ(
        std::memcmp(before.data(), engine.model().params().data(), before.size() * sizeof(float)),
        0)
        << "step " << s << " changed the parameters";
  }
  EXPECT_TRUE(engine.step(*data, 3).finite);
}

TEST(StepEngine, RefusesABatchTheRanksCannotSplit) {
  marin::TrainOptions o;
  o.batch = 6;
  o.micro_batch = 4;
  EXPECT_NE(marin::testing::error_of([&] {
              marin::StepEngine::check_shape(o, 1);
            }).find("--micro-batch 4 does not divide --batch 6"),
            std::string::npos);
  o.micro_batch = 0;  // the default: 2 micro-batches of 3 rows
  EXPECT_NE(marin::testing::error_of([&] {
              marin::StepEngine::check_shape(o, 4);
            }).find("cannot be split over 4 ranks"),
            std::string::npos);
  EXPECT_GT(o.micro_batch, 0);
}
