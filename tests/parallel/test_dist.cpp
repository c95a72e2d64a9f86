// Data parallelism as users run it: the real binary under real `mpirun` (np 1, 2, 4, one OpenMP
// thread per rank) against the plain one-process run. Every step's loss within 1e-5 relative and,
// per tensor, ‖Δw‖/‖w‖ ≤ 1e-5 after the run, with routing flips (steps where a layer's expert
// loads differ) reported — and, since gradients are summed exactly, bit-identical final weights;
// resume N → N and N → M; a killed rank ends the job and resume loses nothing; an error ends every
// rank; eval and score agree. Expert parallelism (--ep): EP 2, EP 4 and DP 2 × EP 2 equal the
// one-process run, resume changes P and N (and re-derives P for the ranks at hand), the pooled →
// dropless switch, a killed rank mid all-to-all.
#include <fmt/core.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <thread>
#include <tuple>

#include "cli_util.hpp"
#include "train/run_checkpoint.hpp"
#include "train/safetensors.hpp"

using marin::testing::final_weights;
using marin::testing::metrics;
using marin::testing::RunResult;
using marin::testing::TempDir;
using marin::testing::write_rows;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using marin::testing::mpirun;
using marin::testing::mpirun_command;

// The newest checkpoint's parameters by tensor, whichever layout it was written in.
std::map<std::string, std::vector<float>> final_model(const std::string& run_dir) {
  auto ckpt = marin::latest_checkpoint(run_dir);
  if (!ckpt) throw std::runtime_error(run_dir + ": no checkpoint");
  const marin::Buffer<float> params = marin::testing::load_checkpoint(*ckpt).params;
  std::map<std::string, std::vector<float>> out;
  const marin::ParamTable table(marin::load_config(*ckpt));
  for (const marin::ParamInfo& p : table.params())
    out[p.name].assign(params.data() + p.offset, params.data() + p.offset + p.size);
  return out;
}

// The acceptance comparison of two runs of the same steps. Returns the routing flips it saw.
int expect_same_run(const std::string& a, const std::string& b, double tol = 1e-5) {
  const auto ma = metrics(a), mb = metrics(b);
  EXPECT_EQ(ma.size(), mb.size());
  int flips = 0;
  for (size_t i = 0; i < std::min(ma.size(), mb.size()); ++i) {
    const double la = ma[i]["loss"].get<double>(), lb = mb[i]["loss"].get<double>();
    EXPECT_LE(std::abs(la - lb), tol * std::abs(la)) << "step " << i << ": " << la << " vs " << lb;
    if (ma[i].contains("valid_ce") || mb[i].contains("valid_ce")) {
      EXPECT_NEAR(ma[i].value("valid_ce", -9.0), mb[i].value("valid_ce", -9.0), tol * 10)
          << "step " << i;
    }
    if (!ma[i].contains("router") || !mb[i].contains("router")) continue;
    for (size_t l = 0; l < ma[i]["router"].size(); ++l) {
      const json &ra = ma[i]["router"][l], &rb = mb[i]["router"][l];
      EXPECT_EQ(ra["tokens"], rb["tokens"]);
      EXPECT_NEAR(ra["drop_fraction"].get<double>(), rb["drop_fraction"].get<double>(), 1e-12);
      if (std::abs(ra["max_load"].get<double>() - rb["max_load"].get<double>()) > 1e-9 ||
          std::abs(ra["load_entropy"].get<double>() - rb["load_entropy"].get<double>()) > 1e-9) {
        ++flips;
        std::cout << "routing flip: step " << i << " layer " << l << "\n";
      }
    }
  }
  const auto wa = final_model(a), wb = final_model(b);
  EXPECT_EQ(wa.size(), wb.size());
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, x] : wa) {
    const auto& y = wb.at(name);
    double d = 0, n = 0;
    for (size_t k = 0; k < x.size(); ++k)
      d += double(x[k] - y[k]) * double(x[k] - y[k]), n += double(x[k]) * double(x[k]);
    const double rel = n > 0 ? std::sqrt(d / n) : std::sqrt(d);
    if (rel > worst) worst = rel, worst_name = name;
    EXPECT_LE(rel, tol) << name;
  }
  std::cout << a << " vs " << b << ": worst per-tensor ||dw||/||w|| " << worst << " (" << worst_name
            << "), routing flips " << flips << "\n";
  return flips;
}

const std::string kTiny = "--preset tiny --batch 8 --steps 12 --seed 5";

// The steps after `step` removed from a run: its checkpoints past it, its metrics lines past it.
void rewind(const std::string& run_dir, int64_t step) {
  for (auto& e : fs::directory_iterator(run_dir + "/checkpoints")) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && std::stoll(n.substr(5)) > step) fs::remove_all(e.path());
  }
  auto lines = metrics(run_dir);
  std::ofstream f(run_dir + "/metrics.jsonl", std::ios::trunc);
  for (auto& j : lines)
    if (j["step"].get<int64_t>() <= step) f << j.dump() << "\n";
}

}  // namespace

TEST(DataParallel, RowsEqualOneProcessAt2And4Ranks) {
  TempDir tmp("dp-rows");
  write_rows(tmp.str("rows.bin"), 64);
  const std::string args = "train " + kTiny + " --rows " + tmp.str("rows.bin");
  auto r = mpirun(0, args + " --out " + tmp.str("np0"));
  ASSERT_EQ(r.code, 0) << r.out;
  for (int np : {1, 2, 4}) {
    const std::string out = tmp.str(fmt::format("np{}", np));
    r = mpirun(np, args + " --out " + out);
    ASSERT_EQ(r.code, 0) << r.out;
    const auto m = metrics(out);
    ASSERT_EQ(m.size(), 12u);
    EXPECT_EQ(m[0]["world_size"].get<int>(), np);
    EXPECT_EQ(json::parse(marin::read_file(out + "/run.json"))["world_size"].get<int>(), np);
    EXPECT_EQ(expect_same_run(tmp.str("np0"), out), 0);
    // Better than the tolerance: the exact gradient sum makes the rank count invisible.
    EXPECT_TRUE(final_weights(tmp.str("np0")) == final_weights(out)) << np << " ranks";
  }
}

TEST(DataParallel, CapacityTransportDropsWhatOneProcessDrops) {
  TempDir tmp("dp-capacity");
  write_rows(tmp.str("rows.bin"), 64);
  const std::string args = "train " + kTiny + " --transport capacity --set capacity_factor=1.0" +
                           " --rows " + tmp.str("rows.bin");
  ASSERT_EQ(mpirun(0, args + " --out " + tmp.str("one")).code, 0);
  auto r = mpirun(4, args + " --out " + tmp.str("four"));
  ASSERT_EQ(r.code, 0) << r.out;
  double dropped = 0;
  for (auto& m : metrics(tmp.str("one")))
    for (auto& l : m["router"]) dropped += l["drop_fraction"].get<double>();
  EXPECT_GT(dropped, 0) << "the test needs drops to be meaningful";
  expect_same_run(tmp.str("one"), tmp.str("four"));  // drop fractions compared per layer/step
  EXPECT_TRUE(final_weights(tmp.str("one")) == final_weights(tmp.str("four")));
}

TEST(DataParallel, TheMicroBatchFixesTheNumericsTheRankCountDoesNot) {
  TempDir tmp("dp-micro");
  write_rows(tmp.str("rows.bin"), 64);
  const std::string args = "train " + kTiny + " --rows " + tmp.str("rows.bin");
  ASSERT_EQ(mpirun(0, args + " --out " + tmp.str("default")).code, 0);
  EXPECT_EQ(json::parse(marin::read_file(tmp.str("default/run.json")))["options"]["micro_batch"],
            2);  // batch 8: four micro-batches of 2 rows
  ASSERT_EQ(mpirun(0, args + " --micro-batch 2 --out " + tmp.str("m2")).code, 0);
  EXPECT_TRUE(final_weights(tmp.str("default")) == final_weights(tmp.str("m2")));
  // Micro-batches of one row: 8 per step, at 1 and 8 ranks alike; another unit of the exact
  // sum, so within the tolerance of the 2-row run, and bit-identical across rank counts.
  ASSERT_EQ(mpirun(0, args + " --micro-batch 1 --out " + tmp.str("m1")).code, 0);
  auto r = mpirun(8, args + " --micro-batch 1 --out " + tmp.str("np8m1"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(final_weights(tmp.str("m1")) == final_weights(tmp.str("np8m1")));
  // Within the tolerance of the 2-row run over a few steps: over more, a last-bit difference can
  // tip a near-tied routing decision (measured: seed 5 flips one at step 11 after the kernels
  // changed, seeds 6-8 do not), and from there the runs are different runs. In fp32: in bf16
  // (auto on an avx512_bf16 CPU) a last-bit difference of one layer's sums moves the next
  // layer's bf16 inputs by a whole bf16 step, and routing flipped at step 3 (Zen 5).
  const std::string short_args =
      "train --preset tiny --batch 8 --steps 4 --seed 5 --dtype fp32 --rows " +
      tmp.str("rows.bin") + " --out ";
  ASSERT_EQ(mpirun(0, short_args + tmp.str("short-m2")).code, 0);
  ASSERT_EQ(mpirun(0, short_args + tmp.str("short-m1") + " --micro-batch 1").code, 0);
  expect_same_run(tmp.str("short-m2"), tmp.str("short-m1"));
  r = mpirun(2, args + " --micro-batch 3 --out " + tmp.str("bad"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--micro-batch 3 does not divide --batch 8"), std::string::npos) << r.out;
  r = mpirun(8, args + " --out " + tmp.str("bad8"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("it is 4 micro-batches of 2 rows"), std::string::npos) << r.out;
  r = mpirun(0, "train --resume " + tmp.str("m1") + " --micro-batch 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("cannot change on --resume"), std::string::npos) << r.out;
}

// The gradient sum overlapped with the backward (a communication thread sums each block as soon
// as the last micro-batch's backward has finished it; the default under MPI) and
// after it (--no-overlap) give the one-process weights bit for bit at 2 and 4 ranks, and a
// non-finite gradient still skips the step on every rank.
TEST(DataParallel, OverlappedGradientSumIsBitIdenticalAndStillSkipsANonFiniteStep) {
  TempDir tmp("dp-overlap");
  write_rows(tmp.str("rows.bin"), 64);
  const std::string args =
      "train --preset tiny --batch 8 --micro-batch 1 --steps 8 --seed 5 "
      "--rows " +
      tmp.str("rows.bin") + " --out ";
  ASSERT_EQ(mpirun(0, args + tmp.str("one")).code, 0);
  for (const auto& [np, flag] :
       std::vector<std::pair<int, std::string>>{{2, ""}, {2, " --no-overlap"}, {4, ""}}) {
    const std::string out = tmp.str(fmt::format("np{}{}", np, flag.empty() ? "" : "-no"));
    auto r = mpirun(np, args + out + flag);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(final_weights(out) == final_weights(tmp.str("one"))) << np << flag;
    for (const json& m : metrics(out))
      EXPECT_EQ(m["comm"].value("overlapped", false), flag.empty()) << np << flag;
  }
  // --inject-nan-grad 3 poisons rank 0's gradient of the 4th step before its first tensor is
  // summed: overlapped or not, the step is skipped and the runs end equal.
  for (const std::string flag : {"", " --no-overlap"}) {
    const std::string out = tmp.str(flag.empty() ? "nan" : "nan-no");
    auto r = mpirun(2, args + out + flag + " --inject-nan-grad 3");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto m = metrics(out);
    ASSERT_EQ(m.size(), 8u);
    EXPECT_EQ(m[3]["skipped"], "non-finite loss or gradient, update skipped") << flag;
  }
  EXPECT_FALSE(final_weights(tmp.str("nan")).empty());
  EXPECT_TRUE(final_weights(tmp.str("nan")) == final_weights(tmp.str("nan-no")));
}

TEST(DataParallel, TextMixtureWithValidationEqualsOneProcess) {
  TempDir tmp("dp-text");
  ASSERT_EQ(marin::testing::tokenize_fixture(tmp), "");
  const std::string args = "train " + kTiny + " --eval-every 6 --eval-batches 2 --data " +
                           std::string(MARIN_SOURCE_DIR) + "/configs/fixture_mixture.toml" +
                           " --token-dir " + tmp.str("tokens") + " --tokenizer " +
                           tmp.str("tok.json");
  auto r = mpirun(0, args + " --out " + tmp.str("one"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = mpirun(2, args + " --out " + tmp.str("two"));
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(metrics(tmp.str("two"))[5].contains("valid_ce"));
  expect_same_run(tmp.str("one"), tmp.str("two"));
}

TEST(DataParallel, CheckpointsDoNotKnowTheRankCount) {
  TempDir tmp("dp-resume");
  write_rows(tmp.str("rows.bin"), 64);
  const std::string args = "train " + kTiny + " --keep-every 6 --ckpt-format full --rows " +
                           tmp.str("rows.bin") + " --out ";
  ASSERT_EQ(mpirun(0, args + tmp.str("one")).code, 0);
  auto r = mpirun(2, args + tmp.str("two"));
  ASSERT_EQ(r.code, 0) << r.out;
  // N → N: bit-exact.
  fs::copy(tmp.str("two"), tmp.str("two-again"), fs::copy_options::recursive);
  rewind(tmp.str("two-again"), 6);
  r = mpirun(2, "train --resume " + tmp.str("two-again"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(final_weights(tmp.str("two")) == final_weights(tmp.str("two-again")));
  // The optimizer state gathered from the shards is the one-process layout: an N → N resume
  // wrote the same bytes.
  EXPECT_TRUE(
      marin::read_file(tmp.str("two/checkpoints/step-00000012/optimizer.safetensors")) ==
      marin::read_file(tmp.str("two-again/checkpoints/step-00000012/optimizer.safetensors")));
  // N → M: 2 → 1 and 2 → 4 resume, and a fork at 4 ranks, meet the one-process tolerance.
  for (int np : {1, 4}) {
    const std::string dir = tmp.str(fmt::format("two-to-{}", np));
    fs::copy(tmp.str("two"), dir, fs::copy_options::recursive);
    rewind(dir, 6);
    r = mpirun(np, "train --resume " + dir);
    ASSERT_EQ(r.code, 0) << r.out;
    expect_same_run(tmp.str("one"), dir);
    EXPECT_TRUE(final_weights(tmp.str("one")) == final_weights(dir)) << "2 -> " << np;
  }
  r = mpirun(4, "train --fork-from " + tmp.str("two/checkpoints/step-00000006") + " --out " +
                    tmp.str("fork4"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto mf = metrics(tmp.str("fork4")), m1 = metrics(tmp.str("one"));
  ASSERT_EQ(mf.size(), 6u);
  for (size_t i = 0; i < mf.size(); ++i)
    EXPECT_NEAR(mf[i]["loss"].get<double>(), m1[i + 6]["loss"].get<double>(),
                1e-5 * m1[i + 6]["loss"].get<double>());
}

// Runs `marin ARGS --out run_dir` under mpirun with 2 ranks in the background and SIGKILLs its
// rank 1 once 12 steps are in the metrics; expects the job to end promptly with a failure and
// leave a checkpoint. Returns the steps that were in the metrics then.
size_t kill_rank_1_midway(const std::string& args, const std::string& run_dir,
                          const std::string& log) {
  const std::string cmd =
      mpirun_command(2) + " " + args + " --out " + run_dir + " > " + log + " 2>&1";
  pid_t job = fork();
  if (job == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), (char*)nullptr);
    _exit(127);
  }
  pid_t victim = -1;
  for (int i = 0; i < 600 && victim < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (metrics(run_dir).size() < 12) continue;
    // Rank 1 is the marin process whose environment says so and whose command names this run.
    for (auto& e : fs::directory_iterator("/proc")) {
      const std::string pid = e.path().filename().string();
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string cmdline, env;
      try {
        cmdline = marin::read_file(e.path().string() + "/cmdline");
        env = marin::read_file(e.path().string() + "/environ");
      } catch (...) {
        continue;
      }
      if (cmdline.rfind(MARIN_BIN, 0) == 0 && cmdline.find(run_dir) != std::string::npos &&
          env.find(std::string("OMPI_COMM_WORLD_RANK=1") + '\0') != std::string::npos)
        victim = std::stoi(pid);
    }
  }
  EXPECT_GT(victim, 0) << marin::read_file(log);
  if (victim <= 0) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  kill(victim, SIGKILL);
  int status = 0;
  waitpid(job, &status, 0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 20.0) << "a killed rank must end the job, not leave rank 0 waiting";
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the job must fail";
  EXPECT_TRUE(marin::latest_checkpoint(run_dir).has_value());
  return metrics(run_dir).size();
}

TEST(DataParallel, KilledRankEndsTheJobAndResumeLosesNothing) {
  TempDir tmp("dp-kill");
  write_rows(tmp.str("rows.bin"), 64);
  const std::string args =
      "train --preset tiny --batch 8 --steps 100 --seed 5 --ckpt-every 5 --rows " +
      tmp.str("rows.bin");
  auto r = mpirun(2, args + " --out " + tmp.str("straight"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string run_dir = tmp.str("killed");
  ASSERT_LT(kill_rank_1_midway(args, run_dir, tmp.str("log")), 100u)
      << "the kill came too late to test anything";
  r = mpirun(2, "train --resume " + run_dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(final_weights(tmp.str("straight")) == final_weights(run_dir));
  // Resume truncated the metrics to its checkpoint: every step appears once.
  const auto after = metrics(run_dir);
  ASSERT_EQ(after.size(), 100u);
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i]["step"].get<size_t>(), i + 1);
}

// SIGTERM to mpirun itself, as `kill` or a scheduler sends it to the job. Open MPI's mpirun does
// not forward it: it sends every rank SIGCONT, then SIGTERM odls_base_sigkill_timeout seconds
// later, then SIGKILL as long again (1 s by default, too short for a step and a checkpoint). With
// a timeout longer than a step plus a checkpoint, every rank gets the SIGTERM, the ranks agree on
// the step to stop at, save the checkpoint together and exit 0, and the resume loses nothing.
TEST(DataParallel, SigtermToMpirunSavesACheckpointAndResumeLosesNothing) {
  TempDir tmp("dp-term");
  write_rows(tmp.str("rows.bin"), 64);
  const std::string args =
      "train --preset tiny --batch 8 --steps 120 --seed 5 --rows " + tmp.str("rows.bin");
  auto r = mpirun(2, args + " --out " + tmp.str("straight"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string run_dir = tmp.str("term"), log = tmp.str("log");
  std::string cmd = mpirun_command(2) + " " + args + " --out " + run_dir + " > " + log + " 2>&1";
  cmd.insert(std::string(MARIN_MPIEXEC).size(), " --mca odls_base_sigkill_timeout 2");
  pid_t job = fork();
  if (job == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), (char*)nullptr);
    _exit(127);
  }
  for (int i = 0; i < 1200 && metrics(run_dir).size() < 6; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t0 = std::chrono::steady_clock::now();
  kill(job, SIGTERM);
  int status = 0;
  waitpid(job, &status, 0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 30.0);
  const std::string out = marin::read_file(log);
  ASSERT_NE(out.find("stopped by signal 15: saved " + run_dir + "/checkpoints/step-"),
            std::string::npos)
      << out;
  auto ckpt = marin::latest_checkpoint(run_dir);
  ASSERT_TRUE(ckpt.has_value()) << out;
  EXPECT_LT(marin::read_run_state(*ckpt).step, 120) << "the signal came too late to test anything";
  r = mpirun(2, "train --resume " + run_dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(final_weights(tmp.str("straight")) == final_weights(run_dir));
  EXPECT_EQ(metrics(run_dir).size(), 120u);
}

TEST(DataParallel, AnErrorEndsEveryRankWithItsMessage) {
  TempDir tmp("dp-error");
  write_rows(tmp.str("rows.bin"), 64);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = mpirun(4, "train --preset tiny --batch 6 --steps 2 --rows " + tmp.str("rows.bin") +
                         " --out " + tmp.str("run"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--batch 6 cannot be split over 4 ranks: it is 2 micro-batches"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("on rank 0 of 4"), std::string::npos) << r.out;
  r = mpirun(2, "train --preset tiny --batch 4 --steps 2 --rows " + tmp.str("missing.bin") +
                    " --out " + tmp.str("run2"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("missing.bin"), std::string::npos) << r.out;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
}

TEST(DataParallel, EvalAndScoreSplitOverRanksGiveTheSameReport) {
  TempDir tmp("dp-eval");
  ASSERT_EQ(marin::testing::tokenize_fixture(tmp), "");
  const std::string mix = std::string(MARIN_SOURCE_DIR) + "/configs/fixture_mixture.toml";
  auto r = mpirun(0, "train --preset tiny --batch 8 --steps 6 --data " + mix + " --token-dir " +
                         tmp.str("tokens") + " --tokenizer " + tmp.str("tok.json") + " --out " +
                         tmp.str("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string ckpt = tmp.str("run/checkpoints/step-00000006");
  const std::string eval =
      "eval --checkpoint " + ckpt + " --token-dir " + tmp.str("tokens") + " --corpus " +
      std::string(MARIN_SOURCE_DIR) + "/data/fixture" + " --mixture " + mix + " --train-corpus " +
      std::string(MARIN_SOURCE_DIR) + "/data/fixture --max-tokens 3000" + " --quiet --json ";
  r = mpirun(0, eval + tmp.str("one.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = mpirun(2, eval + tmp.str("two.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json a = json::parse(marin::read_file(tmp.str("one.json")));
  const json b = json::parse(marin::read_file(tmp.str("two.json")));
  ASSERT_EQ(a["domains"].size(), b["domains"].size());
  int compared = 0;
  for (auto& [name, da] : a["domains"].items()) {
    const json& db = b["domains"][name];
    for (const char* subset : {"all", "clean", "contaminated"}) {
      if (!da[subset]["mean_ce"].is_number()) continue;
      EXPECT_EQ(da[subset]["documents"], db[subset]["documents"]) << name << " " << subset;
      EXPECT_NEAR(da[subset]["mean_ce"].get<double>(), db[subset]["mean_ce"].get<double>(),
                  1e-6 * da[subset]["mean_ce"].get<double>())
          << name << " " << subset;
      EXPECT_NEAR(da[subset]["bpb"].get<double>(), db[subset]["bpb"].get<double>(),
                  1e-6 * da[subset]["bpb"].get<double>())
          << name << " " << subset;
      ++compared;
    }
  }
  EXPECT_GT(compared, 3);
  // score: rows split over the ranks, sums all-reduced.
  write_rows(tmp.str("rows.bin"), 13);
  const std::string score = "score --checkpoint " + ckpt + " --rows " + tmp.str("rows.bin");
  const auto s1 = mpirun(0, score), s2 = mpirun(2, score);
  ASSERT_EQ(s1.code, 0) << s1.out;
  ASSERT_EQ(s2.code, 0) << s2.out;
  const json j1 = json::parse(s1.out), j2 = json::parse(s2.out);
  EXPECT_EQ(j1["tokens"], j2["tokens"]);
  EXPECT_NEAR(j1["ce"].get<double>(), j2["ce"].get<double>(), 1e-6 * j1["ce"].get<double>());
}

// Downstream tasks under mpirun: the forward passes of `marin eval --tasks` are split over the
// ranks, and every log-likelihood, greedy flag and metric equals the one-process result exactly
// (each request is scored by one rank in the same packed forward as one process would, and the
// others add zeros); `train --tasks-every` at 2 ranks records exactly the one-process scores.
TEST(DataParallel, TasksSplitOverRanksEqualOneProcessExactly) {
  TempDir tmp("dp-tasks");
  ASSERT_EQ(marin::testing::tokenize_fixture(tmp), "");
  const std::string fixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";
  auto r = mpirun(0, "tasks build --corpus " + fixture + " --out " + tmp.str("tasks") +
                         " --tasks lambada_style,verse_completion --max-items 10");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string tasks =
      " --tasks lambada_style,verse_completion --task-dir " + tmp.str("tasks");
  const std::string train = "train --preset tiny --batch 8 --steps 4 --seed 5 --data " +
                            std::string(MARIN_SOURCE_DIR) + "/configs/fixture_mixture.toml" +
                            " --token-dir " + tmp.str("tokens") + " --tokenizer " +
                            tmp.str("tok.json") + tasks + " --tasks-every 2";
  r = mpirun(0, train + " --out " + tmp.str("one"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = mpirun(2, train + " --out " + tmp.str("two"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto m1 = metrics(tmp.str("one")), m2 = metrics(tmp.str("two"));
  ASSERT_EQ(m1.size(), 4u);
  ASSERT_EQ(m2.size(), 4u);
  for (size_t i : {1, 3}) {
    ASSERT_TRUE(m1[i].contains("tasks")) << i;
    EXPECT_EQ(m1[i]["tasks"]["tasks"], m2[i]["tasks"]["tasks"]) << "step " << i + 1;
  }
  const std::string ckpt = tmp.str("one/checkpoints/step-00000004");
  const std::string eval = "eval --checkpoint " + ckpt + tasks + " --batch 1 --run " +
                           tmp.str("one") + " --log-samples --bootstrap-iters 500 --quiet --json ";
  r = mpirun(0, eval + tmp.str("e0.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = mpirun(2, eval + tmp.str("e2.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json a = json::parse(marin::read_file(tmp.str("e0.json")));
  const json b = json::parse(marin::read_file(tmp.str("e2.json")));
  for (const char* t : {"lambada_style", "verse_completion"}) {
    ASSERT_EQ(a["samples"][t].size(), 10u) << t;
    EXPECT_EQ(a["samples"][t], b["samples"][t]) << t;  // log-likelihoods bit for bit
    EXPECT_EQ(a["results"][t], b["results"][t]) << t;
    EXPECT_EQ(a["marin"]["tasks"][t]["clean"], b["marin"]["tasks"][t]["clean"]) << t;
  }
}

// The seed's switch at CPU scale, at 2 ranks: `args` (40 steps) with the pooled transport into
// tmp/pooled, then a copy rewound to step 20 resumed with dropless into tmp/switched, against a
// one-process fork from the same checkpoint (tmp/forked): the same bits.
void expect_pooled_then_dropless_equals_a_fork(const TempDir& tmp, const std::string& args) {
  auto r = mpirun(2, args + " --steps 40 --keep-every 20 --set capacity_factor=1.0 --rows " +
                         tmp.str("rows.bin") + " --transport pooled --waves 3 --out " +
                         tmp.str("pooled"));
  ASSERT_EQ(r.code, 0) << r.out;
  fs::copy(tmp.str("pooled"), tmp.str("switched"), fs::copy_options::recursive);
  rewind(tmp.str("switched"), 20);
  r = mpirun(2, "train --resume " + tmp.str("switched") + " --transport dropless");
  ASSERT_EQ(r.code, 0) << r.out;
  r = mpirun(0, "train --fork-from " + tmp.str("pooled/checkpoints/step-00000020") +
                    " --transport dropless --ep 1 --out " + tmp.str("forked"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(final_weights(tmp.str("switched")) == final_weights(tmp.str("forked")));
}

TEST(DataParallel, PooledToDroplessSwitchOnResume) {
  // The seed's switch at CPU scale: 20 steps of the pooled transport, then dropless from the
  // same checkpoint, at 2 ranks by --resume and in one process by --fork-from: the same bits.
  TempDir tmp("dp-switch");
  write_rows(tmp.str("rows.bin"), 64);
  expect_pooled_then_dropless_equals_a_fork(tmp, "train --preset tiny --batch 8 --seed 5");
  if (HasFatalFailure()) return;
  EXPECT_FALSE(final_weights(tmp.str("switched")) == final_weights(tmp.str("pooled")));
  const auto m = metrics(tmp.str("switched"));
  ASSERT_EQ(m.size(), 40u);
  double before = 0, after = 0;
  for (size_t i = 0; i < m.size(); ++i)
    for (auto& l : m[i]["router"]) (i < 20 ? before : after) += l["drop_fraction"].get<double>();
  EXPECT_GT(before, 0) << "the pooled phase should drop";
  EXPECT_EQ(after, 0) << "dropless drops nothing";
  const json run = json::parse(marin::read_file(tmp.str("switched/run.json")));
  EXPECT_EQ(run["options"]["transport"], "dropless");
  ASSERT_EQ(run["lineage"]["switches"].size(), 1u);
  EXPECT_EQ(run["lineage"]["switches"][0]["at_step"], 20);
  EXPECT_EQ(run["lineage"]["switches"][0]["from"], "pooled");
}

TEST(DataParallel, LadderRungsAndAForecastTargetOnTwoRanks) {
  TempDir tmp("dp-ladder");
  write_rows(tmp.str("train.bin"), 256, 64, 512, 7);
  write_rows(tmp.str("valid.bin"), 16, 64, 512, 99);
  const std::string args = "ladder --config " + std::string(MARIN_SOURCE_DIR) +
                           "/configs/ladder_tiny.toml --rows " + tmp.str("train.bin") +
                           " --valid-rows " + tmp.str("valid.bin") + " --out ";
  auto r = mpirun(0, args + tmp.str("one"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = mpirun(2, args + tmp.str("two"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json a = json::parse(marin::read_file(tmp.str("one/ladder.json")));
  const json b = json::parse(marin::read_file(tmp.str("two/ladder.json")));
  ASSERT_EQ(a["rungs"].size(), b["rungs"].size());
  for (size_t i = 0; i < a["rungs"].size(); ++i) {
    const json &ca = a["rungs"][i]["curve"], &cb = b["rungs"][i]["curve"];
    ASSERT_EQ(ca.size(), cb.size());
    for (size_t k = 0; k < ca.size(); ++k)
      EXPECT_NEAR(ca[k]["loss"].get<double>(), cb[k]["loss"].get<double>(),
                  1e-12 * ca[k]["loss"].get<double>())
          << "rung " << i << " point " << k;
    const std::string rung = a["rungs"][i]["name"];
    EXPECT_TRUE(final_weights(tmp.str("one/rung-" + rung)) ==
                final_weights(tmp.str("two/rung-" + rung)))
        << rung;
  }
  // The target run tracked against a forecast of this ladder, at 2 ranks: the same report.
  const std::string fc = tmp.str("forecast.json");
  r = mpirun(0, "forecast --ladder " + tmp.str("one") +
                    " --preset tiny --target-steps 40 --target-batch 4 --l-inf 0 --out " + fc);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string target = "train --preset tiny --batch 4 --steps 40 --seed 1 --rows " +
                             tmp.str("train.bin") + " --valid-rows " + tmp.str("valid.bin") +
                             " --forecast " + fc + " --out ";
  r = mpirun(0, target + tmp.str("target1"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = mpirun(2, target + tmp.str("target2"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("forecast: predicted"), std::string::npos) << r.out;
  const json r1 = json::parse(marin::read_file(tmp.str("target1/forecast_report.json")));
  const json r2 = json::parse(marin::read_file(tmp.str("target2/forecast_report.json")));
  EXPECT_EQ(r1["verdict"], r2["verdict"]);
  EXPECT_NEAR(r1["actual"].get<double>(), r2["actual"].get<double>(),
              1e-12 * r1["actual"].get<double>());
  EXPECT_TRUE(final_weights(tmp.str("target1")) == final_weights(tmp.str("target2")));
}

// The layers of docs/architecture.md, lowest first: a file may include its own folder and the
// folders of lower layers only (folders of one layer do not include each other), so no include
// runs up the layers. MPI is in parallel/ alone.
TEST(Layout, NoIncludeRunsUpTheLayersAndMpiIsInParallelAlone) {
  const std::map<std::string, int> layer = {
      {"core", 0},   {"kernels", 1}, {"parallel", 2}, {"data", 3},  {"model", 3},
      {"optim", 4},  {"plan", 5},    {"eval", 5},     {"train", 6}, {"scaling", 7},
      {"export", 7}, {"report", 8},  {"cli", 9},      {"embed", -1}};  // embed: generated text
  const fs::path src = fs::path(MARIN_SOURCE_DIR) / "src";
  int files = 0;
  for (auto& e : fs::recursive_directory_iterator(src)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), src).string();
    const std::string folder = rel.substr(0, rel.find('/'));
    ASSERT_TRUE(layer.count(folder)) << rel << ": a folder with no layer: add it to this test";
    const std::string text = marin::read_file(e.path().string());
    ++files;
    if (folder != "parallel") {
      EXPECT_EQ(text.find("<mpi.h>"), std::string::npos) << rel;
    }
    for (size_t at = text.find("#include \""); at != std::string::npos;
         at = text.find("#include \"", at + 1)) {
      const size_t begin = at + 10, slash = text.find('/', begin), end = text.find('"', begin);
      if (slash == std::string::npos || slash > end) continue;  // a file beside this one
      const std::string to = text.substr(begin, slash - begin);
      if (to == folder || !layer.count(to)) continue;
      EXPECT_LT(layer.at(to), layer.at(folder)) << rel << " includes " << to << "/: up the layers";
    }
  }
  EXPECT_GT(files, 50);
}

// --- expert parallelism ---------------------------------------------------------------------

// `tiny` with more experts (16: 8 per rank at EP 2, 4 at EP 4).
const std::string kTinyMoE = "--preset tiny --set num_experts=16 --batch 8 --seed 5";

TEST(ExpertParallel, Ep2Ep4AndDp2TimesEp2EqualOneProcess) {
  TempDir tmp("ep-equal");
  write_rows(tmp.str("rows.bin"), 64);
  for (const std::string transport : {"dropless", "capacity"}) {
    const std::string args = "train " + kTinyMoE + " --steps 12 --transport " + transport +
                             " --set capacity_factor=1.0 --rows " + tmp.str("rows.bin");
    const std::string one = tmp.str(transport + "-one");
    auto r = mpirun(0, args + " --out " + one);
    ASSERT_EQ(r.code, 0) << r.out;
    // Overlapped (the all-to-alls beside the experts, the gradient sums beside the backward:
    // the default) and not (--no-overlap): the same bits.
    for (auto [np, ep, flag] : {std::tuple{2, 2, ""},
                                {4, 4, ""},
                                {4, 2, ""},
                                {2, 2, " --no-overlap"},
                                {4, 2, " --no-overlap"}}) {
      const std::string no = *flag ? "-no" : "";
      const std::string out = tmp.str(fmt::format("{}-np{}-ep{}{}", transport, np, ep, no));
      r = mpirun(np, args + fmt::format(" --ep {}{} --out ", ep, flag) + out);
      ASSERT_EQ(r.code, 0) << r.out;
      EXPECT_EQ(expect_same_run(one, out), 0) << out;
      EXPECT_TRUE(final_weights(one) == final_weights(out)) << out;
      const auto m = metrics(out);
      EXPECT_EQ(m[0]["ep"].get<int>(), ep);
      EXPECT_GT(m[0]["comm"]["all_to_all"]["bytes"].get<int64_t>(), 0);
      EXPECT_EQ(m[0]["comm"].value("overlapped", false), !*flag) << out;
    }
    if (transport == "capacity") {
      double dropped = 0;
      for (auto& m : metrics(one))
        for (auto& l : m["router"]) dropped += l["drop_fraction"].get<double>();
      EXPECT_GT(dropped, 0) << "the capacity runs need drops to be meaningful";
    }
  }
}

TEST(ExpertParallel, ResumeChangesTheExpertSplitAndTheRankCount) {
  TempDir tmp("ep-resume");
  write_rows(tmp.str("rows.bin"), 64);
  const std::string args = "train " + kTinyMoE +
                           " --steps 12 --keep-every 6 --ckpt-format full --rows " +
                           tmp.str("rows.bin");
  ASSERT_EQ(mpirun(0, args + " --out " + tmp.str("one")).code, 0);
  auto r = mpirun(4, args + " --ep 2 --out " + tmp.str("dp2ep2"));
  ASSERT_EQ(r.code, 0) << r.out;
  // The checkpoint is the one-process layout: its optimizer state matches byte for byte.
  EXPECT_TRUE(marin::read_file(tmp.str("one/checkpoints/step-00000006/optimizer.safetensors")) ==
              marin::read_file(tmp.str("dp2ep2/checkpoints/step-00000006/optimizer.safetensors")));
  // 4 ranks at EP 2 → 4 at EP 4, 2 at EP 2, 1 (no expert parallelism).
  for (auto [np, ep] : {std::pair{4, 4}, {2, 2}, {1, 1}}) {
    const std::string dir = tmp.str(fmt::format("to-np{}-ep{}", np, ep));
    fs::copy(tmp.str("dp2ep2"), dir, fs::copy_options::recursive);
    rewind(dir, 6);
    r = mpirun(np, fmt::format("train --resume {} --ep {}", dir, ep));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(final_weights(tmp.str("one")) == final_weights(dir)) << dir;
    const json run = json::parse(marin::read_file(dir + "/run.json"));
    EXPECT_EQ(run["options"]["ep"], ep);
    if (ep != 2) {
      ASSERT_EQ(run["lineage"]["switches"].size(), 1u) << dir;
      EXPECT_EQ(run["lineage"]["switches"][0]["from_ep"], 2);
    }
  }
  // Without MPI and without --ep: the layout is re-derived for the one process (EP 2 does not
  // divide 1 rank → EP 1), said in one line, and the run ends bit-identical to the
  // uninterrupted one. An --ep given that the ranks cannot run is an error naming it and the
  // checkpoint, never a skip to an older checkpoint.
  const std::string plain = tmp.str("to-plain");
  fs::copy(tmp.str("dp2ep2"), plain, fs::copy_options::recursive);
  rewind(plain, 6);
  r = marin::testing::run_shell("OMP_NUM_THREADS=1 " + std::string(MARIN_BIN) + " train --resume " +
                                plain + " --ep 2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("cannot resume from " + plain + "/checkpoints/step-00000006: --ep 2 must"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("skipping checkpoint"), std::string::npos) << r.out;
  r = marin::testing::run_shell("OMP_NUM_THREADS=1 " + std::string(MARIN_BIN) + " train --resume " +
                                plain);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("marin: warning: --ep 2 of the checkpoint does not divide 1 rank; resuming "
                       "with --ep 1"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("skipping checkpoint"), std::string::npos) << r.out;
  EXPECT_TRUE(final_weights(tmp.str("one")) == final_weights(plain));
  EXPECT_EQ(json::parse(marin::read_file(plain + "/run.json"))["options"]["ep"], 1);
}

TEST(ExpertParallel, PooledToDroplessSwitchOnResume) {
  // 20 steps of the pooled transport over 2 expert shards (sender and receiver drops), then the
  // ragged all-to-all from the same checkpoint: the same bits as one process from there.
  TempDir tmp("ep-switch");
  write_rows(tmp.str("rows.bin"), 64);
  expect_pooled_then_dropless_equals_a_fork(tmp, "train " + kTinyMoE + " --ep 2");
  if (HasFatalFailure()) return;
  const auto m = metrics(tmp.str("switched"));
  ASSERT_EQ(m.size(), 40u);
  double sender = 0, receiver = 0, after = 0;
  for (size_t i = 0; i < m.size(); ++i)
    for (auto& l : m[i]["router"]) {
      if (i >= 20) after += l["drop_fraction"].get<double>();
      if (i < 20) sender += l["sender_drop_fraction"].get<double>();
      if (i < 20) receiver += l["receiver_drop_fraction"].get<double>();
    }
  EXPECT_GT(sender + receiver, 0) << "the pooled phase should drop";
  EXPECT_EQ(after, 0) << "dropless drops nothing";
}

TEST(ExpertParallel, KilledRankMidAllToAllEndsTheJobAndResumeLosesNothing) {
  TempDir tmp("ep-kill");
  write_rows(tmp.str("rows.bin"), 64);
  const std::string args =
      "train " + kTinyMoE + " --steps 40 --ckpt-every 5 --ep 2 --rows " + tmp.str("rows.bin");
  auto r = mpirun(2, args + " --out " + tmp.str("straight"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string run_dir = tmp.str("killed");
  ASSERT_LT(kill_rank_1_midway(args, run_dir, tmp.str("log")), 40u);
  r = mpirun(2, "train --resume " + run_dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(final_weights(tmp.str("straight")) == final_weights(run_dir));
}

TEST(ExpertParallel, ImpossibleSplitsAreRefusedWithTheReason) {
  TempDir tmp("ep-errors");
  write_rows(tmp.str("rows.bin"), 16);
  const std::string args = "train --preset tiny --batch 8 --steps 2 --rows " + tmp.str("rows.bin") +
                           " --out " + tmp.str("run");
  auto r = mpirun(2, args + " --ep 4");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--ep 4 must be at least 1 and divide the number of ranks (2)"),
            std::string::npos)
      << r.out;
  r = mpirun(2, args + " --ep 2 --set num_experts=5 --set top_k=2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("must divide num_experts (5)"), std::string::npos) << r.out;
}
