// Training as users run it: it learns, resume is bit-identical (straight vs 10 + resume + 10,
// also after SIGINT and after SIGKILL at random moments), forks record lineage, and non-finite
// steps are skipped or stop the run with the last good checkpoint intact.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_util.hpp"
#include "core/fileio.hpp"
#include "core/progress.hpp"
#include "train/run_checkpoint.hpp"
#include "train/trainer.hpp"

using marin::testing::final_weights;
using marin::testing::metrics;
using marin::testing::run;
using marin::testing::spawn_train;
using marin::testing::TempDir;
using marin::testing::write_rows;
namespace fs = std::filesystem;

namespace {

const std::string kBase = " --preset tiny --batch 4 --steps 20 --seed 3";

}  // namespace

TEST(Train, LearnsAndLogsMetrics) {
  TempDir tmp("learn");
  write_rows(tmp.str("rows.bin"), 64);
  auto r = run("train --preset tiny --batch 8 --steps 40 --rows " + tmp.str("rows.bin") +
               " --valid-rows " + tmp.str("rows.bin") + " --eval-every 20 --out " + tmp.str("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto m = metrics(tmp.str("run"));
  ASSERT_EQ(m.size(), 40u);
  EXPECT_LT(m.back()["loss"].get<double>(), m.front()["loss"].get<double>() - 1.0);
  EXPECT_TRUE(m[19].contains("valid_ce"));
  for (const char* k :
       {"loss", "ce", "z", "lr", "grad_norm", "param_norm", "router", "tokens_per_second"})
    EXPECT_TRUE(m[5].contains(k)) << k;
  EXPECT_EQ(m[5]["router"].size(), 4u);  // one entry per layer
  EXPECT_TRUE(m[5]["router"][0].contains("drop_fraction"));
  // MuonH/AdamH norms never change: the hyperball invariant, seen from the metrics.
  const double p0 = m.front()["param_norm"]["muonh"].get<double>();
  EXPECT_NEAR(m.back()["param_norm"]["muonh"].get<double>(), p0, 1e-4 * p0);
}

TEST(Train, ResumeIsBitIdentical) {
  TempDir tmp("resume");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string data = " --rows " + tmp.str("rows.bin");
  ASSERT_EQ(run("train" + kBase + data + " --out " + tmp.str("straight")).code, 0);
  // The same run with a permanent checkpoint at step 10; then everything after step 10 is
  // removed and the run resumed from there.
  auto r = run("train" + kBase + data + " --keep-every 10 --out " + tmp.str("split"));
  ASSERT_EQ(r.code, 0) << r.out;
  fs::remove_all(tmp.str("split/checkpoints/step-00000020"));
  ASSERT_TRUE(fs::exists(tmp.str("split/checkpoints/step-00000010")));
  r = run("train --resume " + tmp.str("split"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string a = final_weights(tmp.str("straight")), b = final_weights(tmp.str("split"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "resumed weights differ from the uninterrupted run";
  EXPECT_EQ(marin::read_file(tmp.str("straight/checkpoints/step-00000020/optimizer.safetensors")),
            marin::read_file(tmp.str("split/checkpoints/step-00000020/optimizer.safetensors")));
}

// oneDNN's fp32 GEMMs sum in an order that depends on the thread count (kernels/threads.hpp), so a
// resume given no thread count runs at the checkpoint's, not at the machine's idle cores of the
// moment (a new run's default); a different --threads is the user's to choose, with a warning.
TEST(Train, ResumeKeepsTheCheckpointsThreadCount) {
  TempDir tmp("resume_threads");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string data = " --rows " + tmp.str("rows.bin") + " --threads 2";
  ASSERT_EQ(run("train" + kBase + data + " --out " + tmp.str("straight")).code, 0);
  auto r = run("train" + kBase + data + " --keep-every 10 --out " + tmp.str("split"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string ten = tmp.str("split/checkpoints/step-00000010");
  EXPECT_EQ(marin::read_run_state(ten).threads, 2);
  fs::remove_all(tmp.str("split/checkpoints/step-00000020"));
  // The tests' environment sets OMP_NUM_THREADS=1 (a choice); this resume makes none.
  r = marin::testing::run_shell("env -u OMP_NUM_THREADS " + std::string(MARIN_BIN) +
                                " train --resume " + tmp.str("split"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(step 10, 1 rank, 2 compute threads, the checkpoint's)"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("compute threads and this process"), std::string::npos) << r.out;
  EXPECT_TRUE(final_weights(tmp.str("straight")) == final_weights(tmp.str("split")));
  EXPECT_EQ(marin::read_run_state(tmp.str("split/checkpoints/step-00000020")).threads, 2);

  fs::remove_all(tmp.str("split/checkpoints/step-00000020"));
  r = run("train --resume " + tmp.str("split") + " --threads 1");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(step 10, 1 rank, 1 compute thread)"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find("warning: " + ten + " was written at 2 compute threads and this process has 1"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--threads 2 continues it bit-identically"), std::string::npos) << r.out;
}

TEST(Train, SigintSavesAndResumesExactly) {
  TempDir tmp("sigint");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string args =
      " train --preset tiny --batch 4 --steps 400 --seed 3 --rows " + tmp.str("rows.bin");
  ASSERT_EQ(run(args.substr(1) + " --out " + tmp.str("straight")).code, 0);
  pid_t pid = spawn_train(args + " --out " + tmp.str("int"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "SIGINT should end the run cleanly";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto ckpt = marin::latest_checkpoint(tmp.str("int"));
  ASSERT_TRUE(ckpt.has_value()) << "SIGINT must leave a checkpoint";
  ASSERT_EQ(run("train --resume " + tmp.str("int")).code, 0);
  EXPECT_TRUE(final_weights(tmp.str("straight")) == final_weights(tmp.str("int")));
}

TEST(Train, SigkillMidWriteResumesFromLastCompleteCheckpoint) {
  TempDir tmp("sigkill");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string args =
      " train --preset tiny --batch 4 --steps 150 --seed 3 --ckpt-every 1 --rows " +
      tmp.str("rows.bin");
  ASSERT_EQ(run(args.substr(1) + " --out " + tmp.str("straight")).code, 0);
  // Kill at several moments: with a checkpoint every step, some kills land inside a write.
  for (int delay_ms : {700, 1100, 1500}) {
    pid_t pid =
        spawn_train(fs::exists(tmp.str("kill/checkpoints")) ? " train --resume " + tmp.str("kill")
                                                            : args + " --out " + tmp.str("kill"));
    // A loaded machine may take longer than the delay to its first checkpoint: wait for one.
    for (int i = 0; i < 600 && marin::checkpoint_dirs(tmp.str("kill")).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms - 500));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  ASSERT_TRUE(marin::latest_checkpoint(tmp.str("kill")).has_value());
  auto r = run("train --resume " + tmp.str("kill"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(final_weights(tmp.str("straight")) == final_weights(tmp.str("kill")));
  // Each resume truncated the metrics to its checkpoint: every step appears exactly once.
  const auto m = metrics(tmp.str("kill"));
  ASSERT_EQ(m.size(), 150u);
  for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m[i]["step"].get<size_t>(), i + 1);
}

TEST(Train, SigtermAndSigusr1SaveAndResumeExactly) {
  // What Slurm and Kubernetes send (SIGTERM) and Slurm's early warning (SIGUSR1): a checkpoint
  // at the end of the step, exit 0, and a resume that loses nothing.
  TempDir tmp("sigterm");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string args =
      " train --preset tiny --batch 4 --steps 150 --seed 3 --rows " + tmp.str("rows.bin");
  ASSERT_EQ(run(args.substr(1) + " --out " + tmp.str("straight")).code, 0);
  for (int sig : {SIGTERM, SIGUSR1}) {
    const std::string dir = tmp.str(sig == SIGTERM ? "term" : "usr1");
    pid_t pid = spawn_train(args + " --out " + dir);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << sig << " should end the run cleanly";
    EXPECT_EQ(WEXITSTATUS(status), 0);
    auto ckpt = marin::latest_checkpoint(dir);
    ASSERT_TRUE(ckpt.has_value()) << "signal " << sig << " must leave a checkpoint";
    EXPECT_LT(marin::read_run_state(*ckpt).step, 150) << "stopped early, not at the end";
    ASSERT_EQ(run("train --resume " + dir).code, 0);
    EXPECT_TRUE(final_weights(tmp.str("straight")) == final_weights(dir)) << sig;
    EXPECT_EQ(metrics(dir).size(), 150u);
  }
}

TEST(Train, InitTakesTheModelFromTheCheckpoint) {
  TempDir tmp("init");
  // A cpu-small checkpoint (seq_len 512, vocab 8192), trained from without --preset.
  ASSERT_EQ(run("init --preset cpu-small --seed 2 --out " + tmp.str("ckpt")).code, 0);
  write_rows(tmp.str("rows.bin"), 2, 512, 8192);
  auto r = run("train --init " + tmp.str("ckpt") + " --rows " + tmp.str("rows.bin") +
               " --batch 1 --steps 1 --out " + tmp.str("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto run_json = nlohmann::json::parse(marin::read_file(tmp.str("run/run.json")));
  EXPECT_EQ(run_json["options"]["model"]["seq_len"], 512);
  EXPECT_EQ(run_json["lineage"]["init"], tmp.str("ckpt"));
  // A model given on the command line that contradicts the checkpoint is refused.
  r = run("train --init " + tmp.str("ckpt") + " --preset tiny --rows " + tmp.str("rows.bin") +
          " --batch 1 --steps 1 --out " + tmp.str("run2"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("config.json does not match"), std::string::npos) << r.out;
}

TEST(Train, ForkChangesSettingsAndRecordsLineage) {
  TempDir tmp("fork");
  write_rows(tmp.str("rows.bin"), 48);
  ASSERT_EQ(run("train" + kBase + " --ckpt-every 10 --keep-every 10 --rows " + tmp.str("rows.bin") +
                " --out " + tmp.str("a"))
                .code,
            0);
  auto r = run("train --fork-from " + tmp.str("a/checkpoints/step-00000010") +
               " --transport capacity --steps 30 --gate-router-wd --out " + tmp.str("b"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto lineage = nlohmann::json::parse(marin::read_file(tmp.str("b/lineage.json")));
  EXPECT_EQ(lineage["at_step"].get<int>(), 10);
  auto st = marin::read_run_state(*marin::latest_checkpoint(tmp.str("b")));
  EXPECT_EQ(st.step, 30);
  EXPECT_EQ(st.options.transport, marin::Transport::Capacity);
  EXPECT_TRUE(st.options.optim.gate_router_wd);
  EXPECT_EQ(st.options.steps, 30);
  auto m = metrics(tmp.str("b"));
  ASSERT_EQ(m.size(), 20u);  // steps 11..30
  EXPECT_EQ(m.front()["step"].get<int>(), 11);
  // A shape change is refused.
  r = run("train --fork-from " + tmp.str("a/checkpoints/step-00000010") +
          " --set hidden_dim=32 --out " + tmp.str("c"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("cannot change the model's shape"), std::string::npos) << r.out;
}

TEST(Train, NonFiniteStepsAreSkippedThenStop) {
  TempDir tmp("nan");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string data = " --rows " + tmp.str("rows.bin");
  // One poisoned step: skipped, reported, the run goes on.
  auto r = run("train" + kBase + data + " --inject-nan-grad 5 --out " + tmp.str("one"));
  ASSERT_EQ(r.code, 0) << r.out;
  // --inject-nan-grad counts from 0 (a testing aid): its step 5 is the run's 6th, "step 6".
  EXPECT_NE(r.out.find("step 6: non-finite loss or gradient, update skipped"), std::string::npos)
      << r.out;
  auto m = metrics(tmp.str("one"));
  EXPECT_TRUE(m[5].contains("skipped"));
  EXPECT_FALSE(m[6].contains("skipped"));
  // Three in a row: the run stops with a clear message; the last good checkpoint is intact.
  r = run("train" + kBase + data + " --ckpt-every 5 --inject-nan-grad 7 8 9 --out " +
          tmp.str("three"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("3 consecutive non-finite steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step-00000005"), std::string::npos) << r.out;
  auto ckpt = marin::latest_checkpoint(tmp.str("three"));
  ASSERT_TRUE(ckpt.has_value());
  EXPECT_EQ(marin::read_run_state(*ckpt).step, 5);
}

TEST(Train, DamagedCheckpointIsDetected) {
  TempDir tmp("damaged");
  write_rows(tmp.str("rows.bin"), 48);
  ASSERT_EQ(run("train" + kBase + " --ckpt-every 10 --keep-every 10 --rows " + tmp.str("rows.bin") +
                " --out " + tmp.str("run"))
                .code,
            0);
  // Flip a byte of the newest checkpoint's weights: resume falls back to the older one and says so.
  const std::string f = tmp.str("run/checkpoints/step-00000020/model.safetensors");
  std::string bytes = marin::read_file(f);
  bytes[bytes.size() - 7] ^= 0x40;
  std::ofstream(f, std::ios::binary) << bytes;
  auto r = run("train --resume " + tmp.str("run"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("checksum mismatch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 10"), std::string::npos) << r.out;
}

TEST(Train, FromTextWithPerDomainEvaluation) {
  TempDir tmp("text");
  const std::string fixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";
  ASSERT_EQ(marin::testing::tokenize_fixture(tmp), "");
  std::ofstream(tmp.str("mix.toml")) << "weights = { bible_kjv = 1, fortunes = 1 }\n";
  auto r = run("train --preset tiny --batch 4 --steps 10 --data " + tmp.str("mix.toml") +
               " --token-dir " + tmp.str("tokens") + " --tokenizer " + tmp.str("tok.json") +
               " --eval-every 5 --eval-domains-every 10 --out " + tmp.str("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto m = metrics(tmp.str("run"));
  ASSERT_EQ(m.size(), 10u);
  EXPECT_TRUE(m[4].contains("valid_ce"));
  ASSERT_TRUE(m[9].contains("eval"));
  EXPECT_EQ(m[9]["eval"]["domains"].size(), 13u);  // every validation domain of the fixture
  EXPECT_GT(m[9]["eval"]["macro_loss"].get<double>(), 0.0);
  EXPECT_GT(m[9]["eval"]["macro_bpb"].get<double>(), 0.0);
  // The checkpoint carries the tokenizer (formats.md), so it can be scored or sampled from.
  EXPECT_TRUE(fs::exists(tmp.str("run/checkpoints/step-00000010/tokenizer.json")));
  // A tokenizer that does not match the shards is refused, naming both hashes.
  ASSERT_EQ(run("tokenizer train --vocab-size 400 --in " + fixture +
                "/fortunes/train-00000.jsonl --out " + tmp.str("other.json"))
                .code,
            0);
  r = run("train --preset tiny --batch 4 --steps 2 --data " + tmp.str("mix.toml") +
          " --token-dir " + tmp.str("tokens") + " --tokenizer " + tmp.str("other.json") +
          " --out " + tmp.str("bad"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("hash"), std::string::npos) << r.out;
}

// Off a terminal (nohup, a batch job) progress is a plain line every --progress-every seconds:
// the count and total, the rate and the ETA (train: also the tokens and the loss).
TEST(Train, ProgressIsPlainLinesOffATerminal) {
  {
    const marin::Progress p(100, "train step", "", 10);  // a resumed run: 10 steps before
    // 30 steps in 49 s: 0.612 steps/s, 60 to go: ETA 98 s.
    EXPECT_EQ(p.plain_line(40, 49.0),
              "train step 40/100 (40.0%) | 0.612/s | elapsed 00:49 | ETA 01:38");
    const marin::Progress b(2000000, "tokenize", "B");
    EXPECT_EQ(b.plain_line(500000, 10.0),
              "tokenize 500.0 kB/2.0 MB (25.0%) | 50.0 kB/s | elapsed 00:10 | ETA 00:30");
  }
  // The class at a tiny interval, stderr captured (not a terminal): a line per update.
  const double every = marin::Progress::plain_interval();
  EXPECT_EQ(every, 30.0);  // the default
  marin::Progress::set_plain_interval(1e-9);
  ::testing::internal::CaptureStderr();
  {
    marin::Progress p(3, "eval web", "");
    p.set_detail(" | more");
    for (uint64_t i = 1; i <= 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      p.update(i);
    }
  }
  const std::string lines = ::testing::internal::GetCapturedStderr();
  marin::Progress::set_plain_interval(every);
  EXPECT_NE(lines.find("eval web 1/3 (33.3%) | "), std::string::npos) << lines;
  EXPECT_NE(lines.find("eval web 3/3 (100.0%) | "), std::string::npos) << lines;
  EXPECT_NE(lines.find(" | ETA 00:00 | more\n"), std::string::npos) << lines;
  EXPECT_EQ(lines.find('\r'), std::string::npos) << lines;
  EXPECT_EQ(marin::Progress(0, "off").enabled(), false);  // a total of 0 shows nothing

  // The binary, its stderr a pipe.
  TempDir tmp("progress");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string args = "train --preset tiny --batch 4 --steps 3 --rows " + tmp.str("rows.bin");
  auto r = run(args + " --progress-every 0.001 --out " + tmp.str("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* want : {"train step 1/3 (33.3%) | ", "train step 3/3 (100.0%) | ", " | ETA ",
                           " | 768 tokens | loss "})  // 3 steps × 4 rows × 64
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  r = run(args + " --progress-every 0 --out " + tmp.str("quiet"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("train step"), std::string::npos) << r.out;
  // A process setting: --resume accepts it.
  r = run("train --resume " + tmp.str("run") + " --steps 4 --progress-every 0.001");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("train step 4/4 (100.0%) | "), std::string::npos) << r.out;
}

// --time-limit counts from the end of the first step: its warm-up (18–27 s on a 2-vCPU
// machine) no longer eats a short limit.
TEST(Train, TheTimeLimitCountsFromTheFirstCompletedStep) {
  marin::TimeLimit limit(5);
  EXPECT_FALSE(limit.step_done(25.0));  // the first step, however long it took
  EXPECT_FALSE(limit.step_done(26.0));
  EXPECT_FALSE(limit.step_done(29.9));
  EXPECT_TRUE(limit.step_done(30.0));  // 5 s after the first step completed
  marin::TimeLimit none(0);
  for (double t : {1.0, 100.0, 1e6}) EXPECT_FALSE(none.step_done(t));
  // A limit shorter than any step: the run still does its first step and one more.
  TempDir tmp("time-limit");
  write_rows(tmp.str("rows.bin"), 48);
  auto r = run("train" + kBase + " --rows " + tmp.str("rows.bin") + " --time-limit 0.001 --out " +
               tmp.str("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("time limit reached"), std::string::npos) << r.out;
  EXPECT_EQ(metrics(tmp.str("run")).size(), 2u);
  EXPECT_EQ(marin::read_run_state(*marin::latest_checkpoint(tmp.str("run"))).step, 2);
}
