// The SIGKILL soak (docs/reliability.md, "Signals and kills"): `marin train` on the tiny preset,
// writing a checkpoint every step, is killed with SIGKILL at 20 random moments (MARIN_SOAK_KILLS
// for more; MARIN_SOAK_SEED replays a sequence), each time resumed. After every kill each
// checkpoint directory must be complete and verify (state.json's own checksum, the checksums of
// both safetensors files, both files parse); once finished the run must equal the uninterrupted
// one byte for byte (weights and optimizer state) with every step once in metrics.jsonl. Where a
// fast CPU completes the run before all the kills have landed, the rest land in a fresh run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "cli_util.hpp"
#include "core/hash.hpp"
#include "train/run_checkpoint.hpp"
#include "train/run_state_check.hpp"
#include "train/safetensors.hpp"

using marin::testing::metrics;
using marin::testing::run;
using marin::testing::spawn_train;
using marin::testing::TempDir;
using marin::testing::write_rows;
namespace fs = std::filesystem;

namespace {

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Every checkpoint of the run is whole: what a resume would otherwise have to skip.
void expect_checkpoints_intact(const std::string& run_dir, int kill) {
  const std::vector<std::string> dirs = marin::checkpoint_dirs(run_dir);
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir + " after kill " + std::to_string(kill));
    const nlohmann::json st = marin::read_state_json(dir);  // its own checksum verifies
    ASSERT_TRUE(st.contains("files"));
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      const std::string bytes = marin::read_file(dir + "/" + file);
      EXPECT_EQ(marin::xxh64_hex(bytes), st["files"][file].get<std::string>()) << file;
      EXPECT_NO_THROW(marin::parse_safetensors(bytes, dir + "/" + file));
    }
    EXPECT_NO_THROW(marin::read_run_state(dir));
  }
  if (!dirs.empty()) {
    EXPECT_EQ(marin::latest_checkpoint(run_dir), dirs.front());
  }
}

}  // namespace

TEST(Soak, TwentyRandomSigkillsResumeByteIdentical) {
  const int kills = int(env_or("MARIN_SOAK_KILLS", 20));
  const uint64_t seed = env_or("MARIN_SOAK_SEED", std::random_device{}());
  std::printf("soak: %d kills, MARIN_SOAK_SEED=%llu\n", kills, (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  TempDir tmp("soak");
  write_rows(tmp.str("rows.bin"), 48);
  const int64_t steps = 300;
  const std::string args = "train --preset tiny --batch 4 --steps " + std::to_string(steps) +
                           " --seed 3 --tokens " + tmp.str("rows.bin");
  ASSERT_EQ(run(args + " --out " + tmp.str("straight")).code, 0);
  const auto straight = marin::latest_checkpoint(tmp.str("straight"));
  ASSERT_TRUE(straight.has_value());

  // A round kills one run until it completes (a fast CPU may finish all the steps before every
  // kill has landed), then checks it against the uninterrupted run; rounds repeat until the
  // kills have all landed, each starting afresh.
  std::uniform_int_distribution<int> delay_ms(100, 1200);  // start-up, steps and mid-write
  // The command that continues the run in `dir` or, killed before its first checkpoint (nothing
  // to resume), starts it again with `fresh` options.
  auto continue_or_start = [&](const std::string& dir, const std::string& fresh) {
    if (!marin::checkpoint_dirs(dir).empty()) return "train --resume " + dir;
    fs::remove_all(dir);
    return args + fresh + " --out " + dir;
  };
  int landed = 0, starts = 0, rounds = 0;
  while (landed < kills) {
    ASSERT_LT(rounds, 2 * kills) << "too few kills land before a run completes";
    const std::string dir = tmp.str("kill" + std::to_string(rounds++));
    int landed_in_round = 0;
    while (landed < kills) {
      // A checkpoint every step, so that many kills land inside a checkpoint's write.
      const pid_t pid =
          spawn_train(std::string(" ").append(continue_or_start(dir, " --ckpt-every 1")));
      ++starts;
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
      kill(pid, SIGKILL);
      int status = 0;
      waitpid(pid, &status, 0);
      if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
        // The run ended before the kill: it may only have finished, never failed.
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
        break;
      }
      ++landed;
      ++landed_in_round;
      expect_checkpoints_intact(dir, landed);
      if (HasFatalFailure()) return;
    }
    SCOPED_TRACE(dir + " after " + std::to_string(landed_in_round) + " kills");
    const auto r = run(continue_or_start(dir, ""));  // finish the run (or find it finished)
    ASSERT_EQ(r.code, 0) << r.out;
    expect_checkpoints_intact(dir, landed);
    const auto last = marin::latest_checkpoint(dir);
    ASSERT_TRUE(last.has_value());
    ASSERT_EQ(marin::read_run_state(*last).step, steps);
    EXPECT_TRUE(marin::read_file(*straight + "/model.safetensors") ==
                marin::read_file(*last + "/model.safetensors"))
        << "weights differ from the uninterrupted run";
    EXPECT_TRUE(marin::read_file(*straight + "/optimizer.safetensors") ==
                marin::read_file(*last + "/optimizer.safetensors"))
        << "optimizer state differs from the uninterrupted run";
    const auto m = metrics(dir);
    ASSERT_EQ(m.size(), size_t(steps));
    for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m[i]["step"].get<size_t>(), i + 1);
  }
  std::printf("soak: %d SIGKILLs landed in %d starts over %d runs; each resumed byte-identical\n",
              landed, starts, rounds);
}
