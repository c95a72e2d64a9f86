// Run directories are owned (docs/reliability.md): one writer at a time (RUN/run.lock, flock),
// whose host and pid the second writer's error names; a new run never starts over an old one
// (--overwrite moves it aside, never deletes); `marin ladder` locks its directory and rungs.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cli_util.hpp"
#include "train/run_checkpoint.hpp"
#include "train/run_lock.hpp"

using marin::testing::final_weights;
using marin::testing::metrics;
using marin::testing::run;
using marin::testing::spawn_train;
using marin::testing::TempDir;
using marin::testing::write_rows;
namespace fs = std::filesystem;

namespace {

const std::string kBase = " --preset tiny --batch 4";

std::string host() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string held_by(const std::string& command, pid_t pid) {
  return fmt::format("is in use by {} (pid {} on host {})", command, pid, host());
}

}  // namespace

TEST(RunDir, ASecondWriterIsRefusedAndNamesTheHolder) {
  TempDir tmp("rundir-lock");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string data = kBase + " --seed 3 --rows " + tmp.str("rows.bin");
  const std::string out = tmp.str("run");
  // A real trainer that runs until it is killed, keeping a checkpoint every 2 steps.
  const pid_t pid = spawn_train(" train" + data + " --steps 100000 --keep-every 2 --out " + out);
  for (int i = 0; i < 600 && !marin::latest_checkpoint(out); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(marin::latest_checkpoint(out).has_value()) << "the trainer never checkpointed";
  // A second new run, a resume and a fork into it are all refused while it runs.
  for (const std::string& second :
       {"train" + data + " --steps 10 --out " + out, "train --resume " + out,
        "train --fork-from " + *marin::latest_checkpoint(out) + " --out " + out}) {
    auto r = run(second);
    EXPECT_EQ(r.code, 1) << second << "\n" << r.out;
    EXPECT_NE(r.out.find(out + ": the run directory " + held_by("marin train", pid)),
              std::string::npos)
        << second << "\n"
        << r.out;
  }
  // The kernel drops the lock with its holder, even on SIGKILL: the run resumes.
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  const int64_t at = marin::read_run_state(*marin::latest_checkpoint(out)).step;
  auto r = run("train --resume " + out + " --time-limit 0.5");
  EXPECT_EQ(r.code, 0) << r.out;
  // Every step appears once in the metrics: nothing of the second writers got in.
  const auto m = metrics(out);
  for (size_t i = 0; i < m.size(); ++i) ASSERT_EQ(m[i]["step"].get<size_t>(), i + 1);
  EXPECT_GE(int64_t(m.size()), at);
}

TEST(RunDir, ANewRunRefusesAnOldOneAndOverwriteMovesItAside) {
  TempDir tmp("rundir-new");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string data = kBase + " --rows " + tmp.str("rows.bin") + " --steps 4";
  const std::string out = tmp.str("run");
  ASSERT_EQ(run("train" + data + " --seed 3 --out " + out).code, 0);
  const std::string weights = final_weights(out);
  auto r = run("train" + data + " --seed 5 --out " + out);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(out +
                       ": already holds a run (run.json or checkpoints); continue it with "
                       "--resume " +
                       out),
            std::string::npos)
      << r.out;
  EXPECT_EQ(final_weights(out), weights);  // nothing pruned, nothing rewritten
  EXPECT_EQ(metrics(out).size(), 4u);
  // A directory with only checkpoints (run.json lost) is a run too.
  fs::remove(out + "/run.json");
  r = run("train" + data + " --seed 3 --out " + out + "/");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("already holds a run"), std::string::npos) << r.out;
  // --overwrite renames the old run aside (twice: .old-1, .old-2) and never deletes it.
  for (const char* aside : {"run.old-1", "run.old-2"}) {
    r = run("train" + data + " --seed 7 --overwrite --out " + out + "/");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("moved the old run in " + out + "/ aside to " + tmp.str(aside)),
              std::string::npos)
        << r.out;
    EXPECT_TRUE(marin::latest_checkpoint(tmp.str(aside)).has_value()) << aside;
    EXPECT_EQ(metrics(tmp.str(aside)).size(), 4u) << aside;
  }
  EXPECT_EQ(final_weights(tmp.str("run.old-1")), weights);
  EXPECT_NE(final_weights(out), weights);  // seed 7: the new run is in --out
  EXPECT_EQ(marin::read_run_state(*marin::latest_checkpoint(out)).options.seed, 7u);
  r = run("train --resume " + out + " --overwrite");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--overwrite excludes --resume"), std::string::npos) << r.out;
}

TEST(RunDir, LadderLocksItsDirectoryAndItsRungs) {
  TempDir tmp("rundir-ladder");
  write_rows(tmp.str("train.bin"), 64, 7);
  write_rows(tmp.str("valid.bin"), 16, 99);
  const std::string dir = tmp.str("ladder");
  const std::string cmd = "ladder --config " MARIN_SOURCE_DIR "/configs/ladder_tiny.toml --out " +
                          dir + " --rows " + tmp.str("train.bin") + " --valid-rows " +
                          tmp.str("valid.bin");
  {
    // Another ladder (here: this process) holds the ladder directory.
    marin::RunLock held(dir, "marin ladder");
    auto r = run(cmd);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find(dir + ": the run directory " + held_by("marin ladder", getpid())),
              std::string::npos)
        << r.out;
    EXPECT_FALSE(fs::exists(dir + "/rung-d32")) << "nothing trained";
  }
  {
    // A trainer holds the first rung's directory.
    marin::RunLock held(dir + "/rung-d32", "marin train");
    auto r = run(cmd);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find(dir + "/rung-d32: the run directory " + held_by("marin train", getpid())),
              std::string::npos)
        << r.out;
  }
}
