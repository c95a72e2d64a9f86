// Sharded checkpoints (--ckpt-format sharded, docs/distributed.md) under real `mpirun`: every
// rank writes its own shard; the checkpoint resumes at 1, 2, 4 and 8 ranks and at --ep 1, 2 and
// 4 bit-identically to the unsharded one-process run (parameters and optimizer state); export and
// score read it as they read a full one; a missing or doubled expert slice is an error naming the
// tensor and the slice; a rank killed while writing leaves the previous checkpoint the latest, and
// the run resumes from it losing nothing.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "cli_util.hpp"
#include "core/fileio.hpp"
#include "report/report.hpp"
#include "train/run_checkpoint.hpp"
#include "train/run_state_check.hpp"

using marin::testing::final_checkpoint;
using marin::testing::load_checkpoint;
using marin::testing::mpirun_command;
using marin::testing::RunResult;
using marin::testing::TempDir;
using marin::testing::write_rows;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// `marin ARGS` under mpirun with np ranks (np = 0: the plain binary, no MPI launcher), with
// environment assignments `env` ("" for none) forwarded to every rank.
RunResult mpirun(int np, const std::string& args, const std::string& env = "") {
  std::string launcher = np == 0 ? std::string(MARIN_BIN) : mpirun_command(np);
  if (!env.empty() && np > 0) {
    const std::string name = env.substr(0, env.find('='));
    launcher.insert(launcher.find(" -np "), " -x " + name);
  }
  return marin::testing::run_shell((env.empty() ? "" : env + " ") + launcher + " " + args);
}

// micro-batch 1: 8 micro-batches a step, so 1, 2, 4 and 8 ranks all compute the same step.
const std::string kRun =
    "train --preset tiny --batch 8 --micro-batch 1 --steps 12 --seed 5 --keep-every 6 --rows ";

// Sharded checkpoints every 2 steps, on top of which a test gives --steps.
const std::string kEveryTwo =
    "train --preset tiny --batch 8 --micro-batch 1 --seed 5 --ckpt-every 2 --ckpt-format sharded";

// A copy of run `from` with everything after step 6 removed (checkpoints and metrics lines).
std::string copy_at_step_6(const std::string& from, const std::string& to) {
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  for (auto& e : fs::directory_iterator(to + "/checkpoints"))
    if (marin::checkpoint_step(e.path().string()) > 6) fs::remove_all(e.path());
  fs::remove(to + "/checkpoints/latest");
  fs::create_directory_symlink("step-00000006", to + "/checkpoints/latest");
  return to;
}

// The checkpoint's state.json with `edit` applied and its own checksum renewed, as a writer with
// a bug (not a damaged disk) would leave it.
void edit_state(const std::string& ckpt, const std::function<void(json&)>& edit) {
  json st = json::parse(marin::read_file(ckpt + "/state.json"));
  edit(st);
  st["state_xxh64"] = marin::state_checksum(st);
  marin::write_file_atomic(ckpt + "/state.json", st.dump(2));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

class ShardedCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir("sharded-ckpt");
    write_rows(tmp_->str("rows.bin"), 64);
    // The reference: one process, the full layout.
    auto r = mpirun(0, kRun + tmp_->str("rows.bin") + " --out " + tmp_->str("one"));
    ASSERT_EQ(r.code, 0) << r.out;
    // Sharded at DP 2 × EP 2.
    r = mpirun(4, kRun + tmp_->str("rows.bin") + " --ep 2 --ckpt-format sharded --out " +
                      tmp_->str("four"));
    ASSERT_EQ(r.code, 0) << r.out;
  }
  static void TearDownTestSuite() { delete tmp_; }
  static std::string str(const std::string& name) { return tmp_->str(name); }
  static TempDir* tmp_;
};
TempDir* ShardedCheckpoint::tmp_ = nullptr;

TEST_F(ShardedCheckpoint, EveryRankWritesItsOwnShardAndTheManifestDescribesThem) {
  const std::string ckpt = str("four/checkpoints/step-00000006");
  EXPECT_FALSE(fs::exists(ckpt + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(ckpt + "/optimizer.safetensors"));
  const json st = json::parse(marin::read_file(ckpt + "/state.json"));
  EXPECT_EQ(st["format"], "sharded");
  EXPECT_EQ(st["mesh"], json({{"ranks", 4}, {"dp", 2}, {"ep", 2}}));
  ASSERT_EQ(st["shards"].size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const std::string file = fmt::format("shard-{:05d}-of-00004.safetensors", r);
    EXPECT_EQ(st["shards"][size_t(r)]["file"], file);
    EXPECT_TRUE(fs::exists(ckpt + "/" + file));
    EXPECT_FALSE(st["shards"][size_t(r)]["pieces"].empty()) << "rank " << r << " wrote nothing";
  }
  EXPECT_EQ(st["tensors"]["layers.0.moe.experts.w_up"]["shape"],
            json(json::array({8, 32, 32})));  // the global shape, not a rank's slice
  // The sharded state is the one-process run's, bit for bit: parameters, m and v.
  EXPECT_TRUE(load_checkpoint(ckpt) == load_checkpoint(str("one/checkpoints/step-00000006")));
  EXPECT_TRUE(final_checkpoint(str("four")) == final_checkpoint(str("one")));
}

// docs/distributed.md's promise: numpy alone reads one rank's shard (scripts/read_shard.py), and
// what it reads is the checkpoint's state at the places the manifest gives.
TEST_F(ShardedCheckpoint, ANumpyScriptReadsOneShard) {
  const std::string ckpt = str("four/checkpoints/step-00000006");
  const auto r = marin::testing::run_shell(std::string("/usr/bin/python3 ") + MARIN_SOURCE_DIR +
                                           "/scripts/read_shard.py " + ckpt + " 1");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto full = load_checkpoint(ckpt);
  const marin::ParamTable table(marin::load_config(ckpt));
  std::istringstream lines(r.out);
  std::string line;
  int pieces = 0;
  while (std::getline(lines, line)) {
    const json p = json::parse(line);
    const int64_t at = table.at(p["tensor"].get<std::string>()).offset;
    double sum = 0;  // in the order numpy's pairwise sum does not promise: compare to 1e-5
    for (int64_t i = p["begin"].get<int64_t>(); i < p["end"].get<int64_t>(); ++i)
      sum += full.params.data()[at + i];
    EXPECT_NEAR(p["params_sum"].get<double>(), sum, 1e-5 * (1 + std::abs(sum))) << line;
    ++pieces;
  }
  EXPECT_GT(pieces, 10);
}

TEST_F(ShardedCheckpoint, ResumesAt1248RanksAndEveryEpBitIdenticallyToTheUnshardedRun) {
  const auto one = final_checkpoint(str("one"));
  for (const auto& [np, ep] : std::vector<std::pair<int, int>>{
           {1, 1}, {2, 1}, {2, 2}, {4, 1}, {4, 2}, {4, 4}, {8, 1}, {8, 2}, {8, 4}}) {
    const std::string dir = copy_at_step_6(str("four"), str(fmt::format("np{}-ep{}", np, ep)));
    const auto r = mpirun(np, fmt::format("train --resume {} --ep {}", dir, ep));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(final_checkpoint(dir) == one) << "4 ranks × EP 2 → " << np << " × EP " << ep;
  }
}

TEST_F(ShardedCheckpoint, OneProcessAndEightRanksWriteItToo) {
  // One process, sharded (one shard), resumed at 4 ranks × EP 4.
  auto r = mpirun(0, kRun + str("rows.bin") + " --ckpt-format sharded --out " + str("single"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string from_one = copy_at_step_6(str("single"), str("single-to-4"));
  r = mpirun(4, "train --resume " + from_one + " --ep 4");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(final_checkpoint(from_one) == final_checkpoint(str("one")));
  // 8 ranks × EP 4, resumed by one process.
  r = mpirun(8, kRun + str("rows.bin") + " --ep 4 --ckpt-format sharded --out " + str("eight"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string from_eight = copy_at_step_6(str("eight"), str("eight-to-1"));
  r = mpirun(0, "train --resume " + from_eight);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(final_checkpoint(from_eight) == final_checkpoint(str("one")));
}

TEST_F(ShardedCheckpoint, ExportAndScoreReadItAsTheyReadAFullOne) {
  const std::string sharded = str("four/checkpoints/step-00000012");
  const std::string full = str("one/checkpoints/step-00000012");
  for (const auto& [ckpt, out] : {std::pair{sharded, str("hf-sharded")}, {full, str("hf-full")}}) {
    const auto r = mpirun(0, "export --checkpoint " + ckpt + " --out " + out);
    ASSERT_EQ(r.code, 0) << r.out;
  }
  EXPECT_TRUE(marin::read_file(str("hf-sharded/model.safetensors")) ==
              marin::read_file(str("hf-full/model.safetensors")));
  const auto a = mpirun(0, "score --checkpoint " + sharded + " --rows " + str("rows.bin"));
  const auto b = mpirun(0, "score --checkpoint " + full + " --rows " + str("rows.bin"));
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_EQ(a.out, b.out);
}

TEST_F(ShardedCheckpoint, AMissingOrDoubledExpertSliceIsAnErrorNamingTheTensorAndTheSlice) {
  const std::string tensor = "layers.1.moe.experts.w_up";
  // Which shard holds the slice of `tensor` that starts at expert 4 (EP rank 1 of the first
  // replica).
  const auto find_piece = [&](const json& st, size_t& shard, size_t& piece) {
    for (shard = 0; shard < st["shards"].size(); ++shard)
      for (piece = 0; piece < st["shards"][shard]["pieces"].size(); ++piece) {
        const json& p = st["shards"][shard]["pieces"][piece];
        if (p["tensor"] == tensor && p["begin"] == 4 * 32 * 32) return;
      }
    FAIL() << "no piece of " << tensor << " starts at expert 4";
  };
  const std::string missing =
      copy_at_step_6(str("four"), str("missing")) + "/checkpoints/step-00000006";
  edit_state(missing, [&](json& st) {
    size_t s = 0, p = 0;
    find_piece(st, s, p);
    st["shards"][s]["pieces"].erase(p);
  });
  std::string e = error_of([&] { load_checkpoint(missing); });
  EXPECT_NE(e.find("tensor '" + tensor + "': elements [4096, 8192) (experts 4-7) are in no shard"),
            std::string::npos)
      << e;
  // The commands that read a checkpoint say the same.
  const auto r = mpirun(0, "export --checkpoint " + missing + " --out " + str("hf-missing"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("experts 4-7) are in no shard"), std::string::npos) << r.out;

  const std::string twice =
      copy_at_step_6(str("four"), str("twice")) + "/checkpoints/step-00000006";
  edit_state(twice, [&](json& st) {
    size_t s = 0, p = 0;
    find_piece(st, s, p);
    st["shards"][(s + 1) % 4]["pieces"].push_back(st["shards"][s]["pieces"][p]);
  });
  e = error_of([&] { load_checkpoint(twice); });
  EXPECT_NE(e.find("tensor '" + tensor + "': elements [4096, 8192) (experts 4-7) are held twice"),
            std::string::npos)
      << e;
}

// A rank SIGKILLed halfway through writing its shard of the step-6 checkpoint (rank 1: a writer;
// rank 0: also the one that publishes): the job fails, step 4 stays the latest complete
// checkpoint, and a resume from it ends where the uninterrupted run does.
TEST_F(ShardedCheckpoint, AKilledWriterLeavesTheLastCompleteCheckpointAndResumeLosesNothing) {
  const std::string args = kEveryTwo + " --steps 8 --rows " + str("rows.bin");
  auto r = mpirun(2, args + " --out " + str("straight"));
  ASSERT_EQ(r.code, 0) << r.out;
  for (int victim : {1, 0}) {
    const std::string run = str(fmt::format("killed-{}", victim));
    r = mpirun(2, args + " --out " + run, fmt::format("MARIN_TEST_KILL_SHARD_WRITER=6:{}", victim));
    EXPECT_NE(r.code, 0) << r.out;
    const auto latest = marin::latest_checkpoint(run);
    ASSERT_TRUE(latest.has_value());
    EXPECT_EQ(marin::checkpoint_step(*latest), 4) << "rank " << victim;
    EXPECT_EQ(fs::read_symlink(run + "/checkpoints/latest").string(), "step-00000004");
    EXPECT_FALSE(fs::exists(run + "/checkpoints/step-00000006"));
    r = mpirun(2, "train --resume " + run);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(final_checkpoint(run) == final_checkpoint(str("straight"))) << "rank " << victim;
    // The interrupted write's leftovers are gone with the next checkpoint.
    EXPECT_FALSE(fs::exists(run + "/checkpoints/step-00000006.tmp"));
  }
}

// A rank reads only the shard files holding what it keeps. Resumed with --shard-params at the rank
// count that wrote the checkpoint, rank 0 keeps exactly what rank 0 wrote: with rank 1's file
// damaged, the resume's error is rank 1's alone (rank 0 never read that file), and every rank then
// turns to the older checkpoint alike. Without --shard-params every rank keeps all the parameters,
// so rank 0 reads (and refuses) the damaged file too.
TEST_F(ShardedCheckpoint, EachRankReadsOnlyTheShardsOfWhatItKeeps) {
  const std::string args = kEveryTwo + " --steps 6 --keep-every 2 --rows " + str("rows.bin");
  auto r = mpirun(2, args + " --out " + str("partial"));
  ASSERT_EQ(r.code, 0) << r.out;
  for (const std::string flag : {" --shard-params", ""}) {
    const bool partial = !flag.empty();
    const std::string run = str(partial ? "partial-damaged" : "partial-damaged-whole");
    fs::copy(str("partial"), run, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    const std::string file = run + "/checkpoints/step-00000006/shard-00001-of-00002.safetensors";
    std::string bytes = marin::read_file(file);
    bytes[bytes.size() - 1] ^= 1;  // the last value's last bit
    marin::write_file_atomic(file, bytes);
    r = mpirun(2, "train --resume " + run + flag);
    ASSERT_EQ(r.code, 0) << r.out;  // from step 4
    EXPECT_NE(r.out.find("shard-00001-of-00002.safetensors: checksum mismatch"), std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("rank 0 of 2 failed") == std::string::npos, partial) << r.out;
    EXPECT_EQ(r.out.find("rank 1 of 2 failed") != std::string::npos, partial) << r.out;
    EXPECT_TRUE(final_checkpoint(run) == final_checkpoint(str("partial"))) << flag;
  }
}

// `marin report` reads a sharded checkpoint too: its size (every shard file) and the QB bias
// spread of each layer, the one-process run's exactly (the runs are bit-identical).
TEST_F(ShardedCheckpoint, TheReportShowsItsSizeAndBiasSpread) {
  const json one = json::parse(marin::report::report_data({str("one")}))["runs"][0]["checkpoints"];
  const json four =
      json::parse(marin::report::report_data({str("four")}))["runs"][0]["checkpoints"];
  ASSERT_EQ(one.size(), four.size());
  ASSERT_FALSE(four.empty());
  for (size_t i = 0; i < four.size(); ++i) {
    ASSERT_TRUE(four[i].contains("bias_spread")) << four[i].dump();
    EXPECT_EQ(four[i]["bias_spread"], one[i]["bias_spread"]) << four[i]["name"];
    EXPECT_GT(four[i]["bias_spread"].size(), 0u);
    // Parameters, m and v: about three times the parameters alone.
    EXPECT_GT(four[i]["bytes"].get<double>(), 2.9 * one[i]["bytes"].get<double>());
  }
}

}  // namespace
