// Finite state (docs/reliability.md): a non-finite update is rolled back on every rank and counted
// like a non-finite loss, checkpoints are written only from finite state and say so, pruning keeps
// the newest finite checkpoint, and the loaders refuse NaN/Inf weights by tensor name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "cli_util.hpp"
#include "core/buffer.hpp"
#include "model/params.hpp"
#include "train/checkpoint.hpp"
#include "train/finite_check.hpp"
#include "train/run_checkpoint.hpp"
#include "train/safetensors.hpp"

using marin::testing::error_of;
using marin::testing::final_weights;
using marin::testing::metrics;
using marin::testing::run;
using marin::testing::run_shell;
using marin::testing::TempDir;
using marin::testing::write_rows;
namespace fs = std::filesystem;

namespace {

const std::string kBase = " --preset tiny --batch 4 --steps 12 --seed 3";

std::string mpirun(int np, const std::string& args) {
  return marin::testing::mpirun_command(np) + " " + args;
}

// Every tensor of every checkpoint of a run (model and optimizer state) is finite.
void expect_all_checkpoints_finite(const std::string& run_dir) {
  for (auto& e : fs::directory_iterator(run_dir + "/checkpoints")) {
    EXPECT_TRUE(marin::checkpoint_known_finite(e.path().string())) << e.path();
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      const auto f = marin::read_safetensors((e.path() / file).string());
      for (auto& [name, t] : f.tensors)
        for (float x : t.data) ASSERT_TRUE(std::isfinite(x)) << e.path() << " " << name;
    }
  }
}

// Rewrites a checkpoint's model.safetensors with one NaN in `tensor`.
void poison(const std::string& ckpt, const std::string& tensor) {
  const std::string path = ckpt + "/model.safetensors";
  auto f = marin::read_safetensors(path);
  f.tensors.at(tensor).data[3] = std::nanf("");
  std::vector<marin::TensorView> views;
  for (auto& n : f.names) views.push_back({n, f.tensors[n].shape, f.tensors[n].data.data()});
  marin::write_safetensors(path, views, f.metadata);
}

}  // namespace

TEST(FiniteCheck, NamesTheFirstNonFiniteTensor) {
  const marin::ModelConfig c = marin::ModelConfig::preset("tiny");
  const marin::ParamTable t(c);
  marin::Buffer<float> x(size_t(t.total()));
  const marin::parallel::Range all{0, t.total()};
  EXPECT_EQ(marin::first_nonfinite_tensor(t, x.data(), all), -1);
  const marin::ParamInfo& head = t.at("lm_head");
  x[size_t(head.offset + head.size - 1)] = INFINITY;
  const int64_t i = marin::first_nonfinite_tensor(t, x.data(), all);
  ASSERT_GE(i, 0);
  EXPECT_EQ(t.params()[size_t(i)].name, "lm_head");
  // A range that does not hold lm_head's start does not see it.
  EXPECT_EQ(marin::first_nonfinite_tensor(t, x.data(), {0, head.offset}), -1);
  const std::string e = error_of([&] { marin::require_finite_params(t, x.data(), "ckpt"); });
  EXPECT_NE(e.find("ckpt: tensor 'lm_head' holds 1 non-finite value"), std::string::npos) << e;
  EXPECT_EQ(error_of([&] { marin::require_finite_params(t, x.data(), "ckpt", true); }), "");
}

// UpdateGuard keeps its copy in the space lent to it (the partials) and its own buffer for the
// rest: a restore gives back exactly the kept runs and m and v, whatever the spans' sizes.
TEST(FiniteUpdate, TheRollbackCopyLivesInLentSpaceAndItsOwnBuffer) {
  const auto fill = [](marin::Buffer<float>& b, float base) {
    for (size_t i = 0; i < b.size(); ++i) b[i] = base + float(i);
  };
  for (const std::vector<size_t>& lent_sizes :
       {std::vector<size_t>{}, {7, 33, 50}, {150}, {100, 100}}) {
    marin::Buffer<float> params(100), m(40), v(40);
    std::vector<marin::Buffer<float>> space;
    std::vector<std::span<float>> spans;
    for (size_t n : lent_sizes) space.emplace_back(n);
    for (auto& s : space) spans.emplace_back(s.data(), s.size());
    marin::UpdateGuard guard;
    guard.lend(spans);
    fill(params, 0), fill(m, 1000), fill(v, 2000);
    const std::vector<marin::parallel::Range> kept = {{10, 30}, {50, 100}};
    guard.save(params, m, v, kept);
    size_t lent = 0;
    for (size_t n : lent_sizes) lent += n;
    EXPECT_EQ(guard.own_size(), int64_t(std::max<size_t>(lent, 150) - lent));  // 70 + 40 + 40
    fill(params, -500), fill(m, -600), fill(v, -700);                          // the update
    guard.restore(params, m, v);
    for (size_t i = 0; i < 100; ++i) {
      const bool is_kept = (i >= 10 && i < 30) || i >= 50;
      EXPECT_EQ(params[i], is_kept ? float(i) : -500 + float(i)) << i;
    }
    for (size_t i = 0; i < 40; ++i) EXPECT_EQ(m[i], 1000 + float(i)) << i;
    for (size_t i = 0; i < 40; ++i) EXPECT_EQ(v[i], 2000 + float(i)) << i;
  }
}

TEST(FiniteUpdate, RollbackEqualsASkippedStep) {
  TempDir tmp("finite-rollback");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string data = kBase + " --rows " + tmp.str("rows.bin");
  // The reference: step 5's gradient is poisoned, so its update is skipped.
  ASSERT_EQ(run("train" + data + " --inject-nan-grad 5 --out " + tmp.str("skip")).code, 0);
  // A NaN in the updated parameters, or an Inf in the optimizer state: the update (parameters,
  // m, v and the QB router bias) is undone, so the run equals the skipped one bit for bit. (Batch
  // 4 is 4 micro-batches: the copy is all in the partials; RollbackIsGlobalUnderMpi's 2 ranks
  // run 2 each, so there it is partly in the guard's own buffer.)
  for (const std::string inject : {"--inject-nan-param", "--inject-inf-state"}) {
    const std::string out = tmp.str(inject.substr(2));
    auto r = run("train" + data + " " + inject + " 5 --out " + out);
    ASSERT_EQ(r.code, 0) << r.out;
    // The injection counts from 0: its step 5 is the run's 6th step, reported 1-based.
    EXPECT_NE(r.out.find("step 6: non-finite update ("), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("rolled back (1 in a row)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(inject == "--inject-nan-param" ? "(parameter '" : "(optimizer state v"),
              std::string::npos)
        << r.out;
    auto m = metrics(out);
    ASSERT_EQ(m.size(), 12u);
    EXPECT_TRUE(m[5].contains("skipped"));
    EXPECT_FALSE(m[5].contains("param_norm"));
    EXPECT_FALSE(m[6].contains("skipped"));
    EXPECT_EQ(final_weights(out), final_weights(tmp.str("skip"))) << inject;
    const auto ck = marin::latest_checkpoint(out), ref = marin::latest_checkpoint(tmp.str("skip"));
    EXPECT_EQ(marin::read_file(*ck + "/optimizer.safetensors"),
              marin::read_file(*ref + "/optimizer.safetensors"))
        << inject;
    expect_all_checkpoints_finite(out);
  }
}

TEST(FiniteUpdate, PoisonedUpdatesStopTheRunWithTheLastGoodCheckpoint) {
  TempDir tmp("finite-stop");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string data = kBase + " --rows " + tmp.str("rows.bin") + " --ckpt-every 5";
  auto r =
      run("train" + data + " --inject-nan-param 7 --inject-inf-state 8 9 --out " + tmp.str("run"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("3 consecutive non-finite steps (last at step 10): stopping; the last good "
                       "checkpoint is " +
                       tmp.str("run") + "/checkpoints/step-00000005"),
            std::string::npos)
      << r.out;
  auto ck = marin::latest_checkpoint(tmp.str("run"));
  ASSERT_TRUE(ck.has_value());
  EXPECT_EQ(marin::read_run_state(*ck).step, 5);
  expect_all_checkpoints_finite(tmp.str("run"));
  // The run resumes from it.
  r = run("train --resume " + tmp.str("run"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(metrics(tmp.str("run")).size(), 12u);
}

// Under MPI the poison is on the last rank only; every rank must roll back together, or rank 0
// (which writes the checkpoints) would keep an update the others undid.
TEST(FiniteUpdate, RollbackIsGlobalUnderMpi) {
  TempDir tmp("finite-mpi");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string data = kBase + " --rows " + tmp.str("rows.bin");
  auto r = run_shell(mpirun(2, "train" + data + " --inject-nan-grad 5 --out " + tmp.str("skip")));
  ASSERT_EQ(r.code, 0) << r.out;
  for (const std::string inject : {"--inject-nan-param", "--inject-inf-state"}) {
    const std::string out = tmp.str(inject.substr(2));
    r = run_shell(mpirun(2, "train" + data + " " + inject + " 5 --out " + out));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("rolled back (1 in a row)"), std::string::npos) << r.out;
    EXPECT_EQ(final_weights(out), final_weights(tmp.str("skip"))) << inject;
  }
  r = run_shell(mpirun(
      2, "train" + data + " --max-bad-steps 2 --inject-nan-param 3 4 --out " + tmp.str("stop")));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 consecutive non-finite steps (last at step 5): stopping; no checkpoint "
                       "was written yet"),
            std::string::npos)
      << r.out;
}

TEST(FiniteCheckpoints, PruningKeepsTheNewestFiniteCheckpoint) {
  TempDir tmp("finite-prune");
  const std::string root = tmp.str("checkpoints");
  auto make = [&](const char* step, const char* state) {
    fs::create_directories(root + "/" + step);
    std::ofstream(root + "/" + step + "/state.json") << state;
  };
  make("step-00000005", R"({"step": 5, "finite": true})");
  make("step-00000010", R"({"step": 10})");  // written before finite checks: not known finite
  marin::prune_checkpoints(tmp.str(), root + "/step-00000010", 0);
  EXPECT_TRUE(fs::exists(root + "/step-00000005"));
  make("step-00000015", R"({"step": 15, "finite": true})");
  marin::prune_checkpoints(tmp.str(), root + "/step-00000015", 0);
  EXPECT_FALSE(fs::exists(root + "/step-00000005"));
  EXPECT_FALSE(fs::exists(root + "/step-00000010"));
  EXPECT_TRUE(fs::exists(root + "/step-00000015"));
}

TEST(FiniteLoaders, NonFiniteWeightsAreRefusedByName) {
  TempDir tmp("finite-load");
  write_rows(tmp.str("rows.bin"), 16);
  ASSERT_EQ(run("train --preset tiny --batch 4 --steps 2 --rows " + tmp.str("rows.bin") +
                " --out " + tmp.str("run"))
                .code,
            0);
  const std::string ck = *marin::latest_checkpoint(tmp.str("run"));
  // sample needs the checkpoint's tokenizer before it reads the weights.
  const std::string fixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";
  auto r = run("tokenizer train --vocab-size 300 --in " + fixture +
               "/bible_kjv/train-00000.jsonl --out " + ck + "/tokenizer.json");
  ASSERT_EQ(r.code, 0) << r.out;
  poison(ck, "lm_head");
  const std::string named = ck + "/model.safetensors: tensor 'lm_head' holds 1 non-finite value";
  r = run("score --checkpoint " + ck + " --rows " + tmp.str("rows.bin"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(named), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--allow-nonfinite"), std::string::npos) << r.out;
  r = run("sample --checkpoint " + ck + " --prompt 'In the beginning' --max-tokens 4");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(named), std::string::npos) << r.out;
  r = run("train --init " + ck + " --steps 2 --batch 4 --rows " + tmp.str("rows.bin") + " --out " +
          tmp.str("init"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(named), std::string::npos) << r.out;
  // For forensics the weights load with a warning.
  r = run("score --allow-nonfinite --checkpoint " + ck + " --rows " + tmp.str("rows.bin"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: " + named), std::string::npos) << r.out;
}
