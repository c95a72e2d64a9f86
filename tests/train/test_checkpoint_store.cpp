// The checkpoints of a run directory on their own (train/checkpoint_store.hpp): write → list →
// verify → prune → resume in a temporary directory, the checkpoints/latest link, a damaged
// checkpoint refused for the one before it, and a fork that would change the model's shape.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_util.hpp"
#include "core/fileio.hpp"
#include "data/batch_factory.hpp"
#include "kernels/threads.hpp"
#include "train/checkpoint_store.hpp"
#include "train/step_engine.hpp"

using marin::testing::error_of;
using marin::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// A tiny run's options, full-layout state and data source, to write checkpoints of.
struct Fixture {
  TempDir tmp{"checkpoint-store"};
  marin::TrainOptions o;
  std::unique_ptr<marin::ParamTable> table;
  marin::Buffer<float> params, m, v;
  std::unique_ptr<marin::BatchSource> data;

  Fixture() {
    marin::testing::write_rows(tmp.str("rows.bin"), 48);
    o.model = marin::ModelConfig::preset("tiny");
    o.batch = 4;
    o.steps = 10;
    o.data = {{"kind", "rows"}, {"path", tmp.str("rows.bin")}};
    o.resolve_hparams();
    table = std::make_unique<marin::ParamTable>(o.model);
    const size_t n = size_t(table->total());
    params.resize(n), m.resize(n), v.resize(n);
    marin::StepEngine engine(o, marin::parallel::world());  // a real model's parameters
    engine.init(3);
    params = engine.model().params();
    for (size_t i = 0; i < n; ++i) m[i] = 1e-4f * float(i % 13), v[i] = 1e-6f;
    data = marin::make_batch_source(o.data, marin::data_options(o));
  }
  // The state after `steps` steps (the data source advanced to match).
  marin::RunState state(int64_t steps) {
    std::vector<int32_t> t(size_t(o.batch * o.model.seq_len)), l(t.size()), s(t.size());
    data->restore(marin::make_batch_source(o.data, marin::data_options(o))->state());
    for (int64_t i = 0; i < steps; ++i) data->next(o.batch, t.data(), l.data(), s.data());
    return {steps, o, data->state(), nlohmann::json(), marin::kernels::compute_threads()};
  }
};

}  // namespace

TEST(CheckpointStore, WriteListVerifyPruneResumeRoundTrip) {
  Fixture f;
  const marin::CheckpointStore store(f.tmp.str("run"));
  EXPECT_TRUE(store.list().empty());
  EXPECT_NE(error_of([&] { store.require_checkpoint(); }).find("no complete checkpoint"),
            std::string::npos);
  const std::string two =
      store.write(f.state(2), *f.table, f.params.data(), f.m.data(), f.v.data(), 0);
  EXPECT_EQ(fs::path(two).filename(), "step-00000002");
  EXPECT_EQ(store.latest_link(), "step-00000002");
  marin::CheckpointStore::verify(two);
  // A rolling checkpoint goes when a newer one is written; one at a multiple of keep_every stays.
  const std::string four =
      store.write(f.state(4), *f.table, f.params.data(), f.m.data(), f.v.data(), 4);
  EXPECT_EQ(store.list(), std::vector<std::string>{four});
  EXPECT_EQ(store.latest_link(), "step-00000004");
  const std::string six =
      store.write(f.state(6), *f.table, f.params.data(), f.m.data(), f.v.data(), 4);
  EXPECT_EQ(store.list(), (std::vector<std::string>{six, four}));
  EXPECT_EQ(store.latest().value_or(""), six);

  std::vector<std::string> tried;
  store.resume({}, true, [&](const marin::ResumePoint& p) {
    tried.push_back(p.dir);
    EXPECT_EQ(p.state.step, 6);
    EXPECT_EQ(p.state.options.to_json(), f.o.to_json());
  });
  EXPECT_EQ(tried, std::vector<std::string>{six});
  marin::Buffer<float> p, m, v;
  marin::CheckpointStore::load(six, *f.table, p, m, v);
  EXPECT_EQ(std::memcmp(p.data(), f.params.data(), p.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(m.data(), f.m.data(), m.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(v.data(), f.v.data(), v.size() * sizeof(float)), 0);
}

TEST(CheckpointStore, ADamagedCheckpointIsRefusedForTheOneBefore) {
  Fixture f;
  const marin::CheckpointStore store(f.tmp.str("run"));
  const std::string four =
      store.write(f.state(4), *f.table, f.params.data(), f.m.data(), f.v.data(), 2);
  const std::string six =
      store.write(f.state(6), *f.table, f.params.data(), f.m.data(), f.v.data(), 2);
  {
    std::fstream file(six + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(-4, std::ios::end);
    file.write("\x7f\x7f\x7f\x7f", 4);
  }
  EXPECT_NE(error_of([&] { marin::CheckpointStore::verify(six); }).find("checksum mismatch"),
            std::string::npos);
  EXPECT_EQ(store.latest().value_or(""), four);
  // The resume tries the newest first; a start that throws (here: the load) falls back.
  std::vector<std::string> tried;
  store.resume({}, false, [&](const marin::ResumePoint& p) {
    tried.push_back(p.dir);
    marin::Buffer<float> params, m, v;
    marin::CheckpointStore::load(p.dir, *f.table, params, m, v);
  });
  EXPECT_EQ(tried, (std::vector<std::string>{six, four}));
  // None passing is an error naming the newest's reason.
  const std::string e = error_of([&] {
    store.resume({}, false, [](const marin::ResumePoint&) { marin::fail("not today"); });
  });
  EXPECT_NE(e.find("no checkpoint passes the checks for a resume; the newest: not today"),
            std::string::npos)
      << e;
}

TEST(CheckpointStore, ResumeAppliesChangesAndForkKeepsTheShape) {
  Fixture f;
  const marin::CheckpointStore store(f.tmp.str("run"));
  const std::string four =
      store.write(f.state(4), *f.table, f.params.data(), f.m.data(), f.v.data(), 0);
  marin::ResumeChanges more;
  more.edit = [](marin::TrainOptions& o) { o.steps = 20; };
  const marin::ResumePoint r = marin::CheckpointStore::resume_point(four, more);
  EXPECT_EQ(r.state.options.steps, 20);
  EXPECT_EQ(r.state.options.optim.total_steps, 20);
  more.edit = [](marin::TrainOptions& o) { o.steps = 3; };
  EXPECT_NE(error_of([&] {
              marin::CheckpointStore::resume_point(four, more);
            }).find("has already done 4 steps"),
            std::string::npos);

  marin::TrainOptions changed = f.o;
  changed.steps = 30;
  const marin::ResumePoint fork = marin::CheckpointStore::fork_point(four, changed);
  EXPECT_EQ(fork.state.step, 4);
  EXPECT_TRUE(fork.restore_data);
  EXPECT_EQ(fork.state.lineage["at_step"], 4);
  changed.model.num_layers += 1;
  EXPECT_NE(error_of([&] {
              marin::CheckpointStore::fork_point(four, changed);
            }).find("a fork cannot change the model's shape"),
            std::string::npos);
}

// A setting the resume cannot run with (an option given with it, or the ranks at hand) is not
// damage: the resume stops at the newest checkpoint, naming it and the option, and never falls
// back to an older one (which would silently drop the steps after it).
TEST(CheckpointStore, ASettingsErrorIsNotSkippedForAnOlderCheckpoint) {
  Fixture f;
  const marin::CheckpointStore store(f.tmp.str("run"));
  store.write(f.state(4), *f.table, f.params.data(), f.m.data(), f.v.data(), 2);
  const std::string six =
      store.write(f.state(6), *f.table, f.params.data(), f.m.data(), f.v.data(), 2);
  std::vector<std::string> tried;
  const auto start = [&](const marin::ResumePoint& p) { tried.push_back(p.dir); };
  // --batch 4 is 4 micro-batches of 1 row: 3 ranks cannot share them.
  marin::ResumeChanges three;
  three.ranks = 3;
  std::string e = error_of([&] { store.resume(three, false, start); });
  EXPECT_NE(e.find("cannot resume from " + six), std::string::npos) << e;
  EXPECT_NE(e.find("--batch 4 cannot be split over 3 ranks"), std::string::npos) << e;
  EXPECT_NE(e.find("no older checkpoint is tried"), std::string::npos) << e;
  EXPECT_TRUE(tried.empty());
  // An --ep given with --resume is used as given, or refused by name.
  marin::ResumeChanges ep;
  ep.ranks = 1;
  ep.given = {"--ep"};
  ep.edit = [](marin::TrainOptions& o) { o.ep = 2; };
  e = error_of([&] { store.resume(ep, false, start); });
  EXPECT_NE(e.find("cannot resume from " + six), std::string::npos) << e;
  EXPECT_NE(e.find("--ep 2 must be at least 1 and divide the number of ranks (1)"),
            std::string::npos)
      << e;
  EXPECT_TRUE(tried.empty());
  // --steps below the newest checkpoint's step is the user's setting, not the checkpoint's fault.
  marin::ResumeChanges fewer;
  fewer.edit = [](marin::TrainOptions& o) { o.steps = 5; };
  e = error_of([&] { store.resume(fewer, false, start); });
  EXPECT_NE(e.find("--steps 5: " + six + " has already done 6 steps"), std::string::npos) << e;
  EXPECT_TRUE(tried.empty());
  // A SettingsError from the start (the trainer's set-up) stops the resume the same way.
  e = error_of([&] {
    store.resume({}, false, [&](const marin::ResumePoint& p) {
      tried.push_back(p.dir);
      throw marin::SettingsError("--eval-domains-every needs --ep 1");
    });
  });
  EXPECT_EQ(tried, std::vector<std::string>{six});
  EXPECT_NE(e.find("cannot resume from " + six + ": --eval-domains-every"), std::string::npos) << e;
}

TEST(CheckpointStore, TheExpertSplitIsReDerivedForTheRanksAtHand) {
  Fixture f;
  const marin::CheckpointStore store(f.tmp.str("run"));
  f.o.ep = 4;                           // as written by a run at 4 (or 8) ranks; tiny has 8 experts
  f.o.batch = 24, f.o.micro_batch = 1;  // 24 micro-batches: 1, 2, 6 and 8 ranks share them
  const std::string four =
      store.write(f.state(4), *f.table, f.params.data(), f.m.data(), f.v.data(), 0);
  marin::ResumeChanges at;
  at.ranks = 1;
  marin::ResumePoint p = marin::CheckpointStore::resume_point(four, at);
  EXPECT_EQ(p.state.options.ep, 1);
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_EQ(p.warnings.back(),
            "--ep 4 of the checkpoint does not divide 1 rank; resuming with --ep 1");
  // The switch is recorded like a chosen one.
  ASSERT_EQ(p.state.lineage["switches"].size(), 1u);
  EXPECT_EQ(p.state.lineage["switches"][0]["from_ep"], 4);
  EXPECT_EQ(p.state.lineage["switches"][0]["ep"], 1);
  // 6 ranks, 8 experts: the largest divisor of gcd(6, 8) = 2 not above 4.
  at.ranks = 6;
  p = marin::CheckpointStore::resume_point(four, at);
  EXPECT_EQ(p.state.options.ep, 2);
  // A stored split the ranks allow is kept, without a word.
  at.ranks = 8;
  p = marin::CheckpointStore::resume_point(four, at);
  EXPECT_EQ(p.state.options.ep, 4);
  EXPECT_TRUE(p.state.lineage.is_null() || !p.state.lineage.contains("switches"));
  // The resume takes the newest checkpoint with the re-derived split.
  at.ranks = 2;
  std::vector<int> eps;
  store.resume(at, false, [&](const marin::ResumePoint& q) { eps.push_back(q.state.options.ep); });
  EXPECT_EQ(eps, std::vector<int>{2});
}

// Integrity is still what falls back: a damaged newest checkpoint is skipped with the ranks
// given too.
TEST(CheckpointStore, ADamagedCheckpointStillFallsBackWithTheRanksGiven) {
  Fixture f;
  const marin::CheckpointStore store(f.tmp.str("run"));
  const std::string four =
      store.write(f.state(4), *f.table, f.params.data(), f.m.data(), f.v.data(), 2);
  const std::string six =
      store.write(f.state(6), *f.table, f.params.data(), f.m.data(), f.v.data(), 2);
  marin::write_file_atomic(six + "/state.json", "{");
  marin::ResumeChanges at;
  at.ranks = 2;
  std::vector<std::string> tried;
  store.resume(at, false, [&](const marin::ResumePoint& p) { tried.push_back(p.dir); });
  EXPECT_EQ(tried, std::vector<std::string>{four});
}
