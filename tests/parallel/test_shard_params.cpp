// Fully sharded dense parameters (--shard-params, docs/distributed.md) under real `mpirun`: the
// parameters and gradients outside a rank's run are gathered per unit and given back after use,
// and the run stays bit-identical to the one-process run: overlapped or not, at 2, 4 and 8 ranks,
// with several micro-batches a rank or one, with expert parallelism, with the capacity transport.
// A rolled-back update restores the runs the rank holds; checkpoints written with it (full or
// sharded) resume at any rank count with or without it, parameters and optimizer state alike; each
// rank's peak memory is measured on the metrics line.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_util.hpp"
#include "train/run_checkpoint.hpp"

using marin::testing::final_checkpoint;
using marin::testing::final_weights;
using marin::testing::metrics;
using marin::testing::mpirun;
using marin::testing::RunResult;
using marin::testing::TempDir;
using marin::testing::write_rows;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// micro-batch 1: 8 micro-batches a step, so 1, 2, 4 and 8 ranks all compute the same step.
const std::string kRun = "train --preset tiny --batch 8 --micro-batch 1 --steps 8 --seed 5 ";

class ShardParams : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir("shard-params");
    write_rows(tmp_->str("rows.bin"), 64);
  }
  static void TearDownTestSuite() { delete tmp_; }
  static std::string str(const std::string& name) { return tmp_->str(name); }
  static std::string rows() { return " --rows " + str("rows.bin"); }
  // The run `name` of `args` (np 0: one process without mpirun), which must succeed.
  static std::string run(int np, const std::string& args, const std::string& name) {
    const RunResult r = mpirun(np, kRun + args + rows() + " --out " + str(name));
    EXPECT_EQ(r.code, 0) << name << ": " << r.out;
    return str(name);
  }
  static TempDir* tmp_;
};
TempDir* ShardParams::tmp_ = nullptr;

}  // namespace

TEST_F(ShardParams, BitIdenticalToOneProcessOverlappedOrNotAtAnyRankCount) {
  const std::string one = run(0, "", "one");
  for (const auto& [np, flag] : std::vector<std::pair<int, std::string>>{
           {2, ""}, {2, " --no-overlap"}, {4, ""}, {8, ""}, {2, " --dtype fp32"}}) {
    const std::string name = fmt::format("np{}{}", np, flag.empty() ? "" : flag.substr(3, 5));
    const std::string out = run(np, "--shard-params" + flag, name);
    if (flag == " --dtype fp32") {
      const std::string ref = run(0, "--dtype fp32", "one-fp32");
      EXPECT_TRUE(final_weights(out) == final_weights(ref)) << name;
      continue;
    }
    EXPECT_TRUE(final_weights(out) == final_weights(one)) << name;
    const auto m = metrics(out);
    ASSERT_EQ(m.size(), 8u) << name;
    EXPECT_EQ(m[0]["comm"].value("overlapped", false), flag.empty()) << name;
  }
}

TEST_F(ShardParams, BitIdenticalWithExpertParallelismAndTheCapacityTransport) {
  const std::string one = run(0, "", "one-ep");
  EXPECT_TRUE(final_weights(run(4, "--shard-params --ep 2", "dp2ep2")) == final_weights(one));
  // The capacity transport counts its capacity over the ranks in the forward, beside the gathers.
  const std::string capacity = "--transport capacity --set capacity_factor=1.0 ";
  const std::string ref = run(0, capacity, "one-capacity");
  EXPECT_TRUE(final_weights(run(2, capacity + "--shard-params", "capacity")) == final_weights(ref));
}

TEST_F(ShardParams, ARolledBackUpdateRestoresWhatEachRankHolds) {
  // --inject-nan-param 3 poisons what step 4's update wrote on the last rank: every rank rolls
  // back, and the run ends where the one with every parameter present ends.
  const std::string plain = run(2, "--inject-nan-param 3", "nan-plain");
  const std::string sharded = run(2, "--inject-nan-param 3 --shard-params", "nan-sharded");
  EXPECT_NE(metrics(sharded)[3].value("skipped", ""), "");
  EXPECT_TRUE(final_weights(plain) == final_weights(sharded));
}

TEST_F(ShardParams, CheckpointsResumeAtAnyRankCountWithOrWithoutIt) {
  const std::string one = run(0, "", "one-ckpt");
  for (const std::string format : {"full", "sharded"}) {
    const std::string out =
        run(2, "--shard-params --keep-every 4 --ckpt-format " + format, "ckpt-" + format);
    EXPECT_TRUE(final_checkpoint(out) == final_checkpoint(one)) << format;
    for (const auto& [np, flag] :
         std::vector<std::pair<int, std::string>>{{4, " --shard-params"}, {0, ""}}) {
      const std::string again = str(fmt::format("again-{}-{}", format, np));
      fs::copy(out, again, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
      fs::remove_all(again + "/checkpoints/step-00000008");
      fs::remove(again + "/checkpoints/latest");
      fs::create_directory_symlink("step-00000004", again + "/checkpoints/latest");
      const RunResult r = mpirun(np, "train --resume " + again + flag);
      ASSERT_EQ(r.code, 0) << r.out;
      EXPECT_TRUE(final_checkpoint(again) == final_checkpoint(one)) << format << " at " << np;
    }
  }
}

// Memory measured: a model whose parameters outweigh its activations (64 routed experts of 512
// hidden units, 8 layers: 24 M values) at 2 ranks in fp32. Each rank's peak resident memory is on
// the metrics line; sharded, it is lower by at least half of what `marin plan --ranks 2` says the
// sharding saves, and neither run exceeds the plan's parts by more than the process itself
// (binary, libraries, MPI: under 256 MiB).
TEST_F(ShardParams, EachRankHoldsLessMemoryAsMarinPlanSays) {
  const std::string model =
      "--set num_layers=8 --set num_experts=64 --set expert_dim=512 --batch 8 --micro-batch 4 ";
  const auto planned = [&](const std::string& flag) {
    const RunResult r = mpirun(0, "plan --preset tiny --json --ranks 2 " + model + flag);
    EXPECT_EQ(r.code, 0) << r.out;
    return json::parse(r.out)["memory_per_rank"]["fp32"]["total"].get<int64_t>();
  };
  const auto measured = [&](const std::string& flag, const std::string& name) {
    const std::string out = str(name);
    const RunResult r = mpirun(2, "train --preset tiny --steps 2 --seed 1 --dtype fp32 " + model +
                                      flag + rows() + " --out " + out);
    EXPECT_EQ(r.code, 0) << r.out;
    return metrics(out).back()["peak_rss_bytes"].get<int64_t>();
  };
  const int64_t plan_whole = planned(""), plan_sharded = planned("--shard-params");
  const int64_t whole = measured("", "mem-whole"), sharded = measured("--shard-params", "mem-sh");
  std::cout << "peak resident memory per rank: " << whole / (1 << 20) << " MiB, sharded "
            << sharded / (1 << 20) << " MiB (planned " << plan_whole / (1 << 20) << " and "
            << plan_sharded / (1 << 20) << " MiB)\n";
  ASSERT_LT(plan_sharded, plan_whole);
  EXPECT_LE(sharded, whole - (plan_whole - plan_sharded) / 2);
  EXPECT_LE(whole, plan_whole + (int64_t(256) << 20));
  EXPECT_LE(sharded, plan_sharded + (int64_t(256) << 20));
}

// The evaluations inside a training run: validation runs through the step engine in lockstep,
// while the per-domain evaluation and the tasks split their documents unevenly over the ranks
// (and could not gather block by block in lockstep): they see the whole model (WholeParams), and
// every score equals the one-process run's.
TEST_F(ShardParams, EvaluationsDuringTrainingSeeTheWholeModel) {
  ASSERT_EQ(marin::testing::tokenize_fixture(*tmp_), "");
  const std::string fixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";
  RunResult r = mpirun(0, "tasks build --corpus " + fixture + " --out " + str("tasks") +
                              " --tasks lambada_style --max-items 8");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string train =
      "train --preset tiny --batch 8 --steps 4 --seed 5 --data " + std::string(MARIN_SOURCE_DIR) +
      "/configs/fixture_mixture.toml --token-dir " + str("tokens") + " --tokenizer " +
      str("tok.json") + " --tasks lambada_style --task-dir " + str("tasks") +
      " --tasks-every 2 --eval-every 2 --eval-batches 1 --eval-domains-every 4 --out ";
  r = mpirun(0, train + str("eval-one"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = mpirun(2, train + str("eval-sharded") + " --shard-params");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto one = metrics(str("eval-one")), sharded = metrics(str("eval-sharded"));
  ASSERT_EQ(one.size(), 4u);
  ASSERT_EQ(sharded.size(), 4u);
  for (size_t i : {1, 3}) {
    ASSERT_TRUE(one[i].contains("tasks")) << i;
    EXPECT_EQ(one[i]["tasks"]["tasks"], sharded[i]["tasks"]["tasks"]) << "step " << i + 1;
    EXPECT_NEAR(one[i]["valid_ce"].get<double>(), sharded[i]["valid_ce"].get<double>(), 1e-9);
  }
  ASSERT_TRUE(one[3].contains("eval")) << one[3].dump();
  EXPECT_EQ(one[3]["eval"].dump(), sharded[3]["eval"].dump());
  EXPECT_TRUE(final_weights(str("eval-one")) == final_weights(str("eval-sharded")));
}
