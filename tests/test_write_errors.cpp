// Failed writes are never silent (docs/reliability.md, "Writes"): a metrics line that does not
// reach the disk stops the run with a checkpoint and a message naming the file, and a report on
// stdout that cannot be written is a non-zero exit. /dev/full fails every write with ENOSPC, as
// a full filesystem does, and works as root (where a read-only file would not).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "cli_util.hpp"
#include "train/run_checkpoint.hpp"

using marin::testing::final_weights;
using marin::testing::metrics;
using marin::testing::run;
using marin::testing::run_shell;
using marin::testing::TempDir;
using marin::testing::write_rows;
namespace fs = std::filesystem;

namespace {
const std::string kArgs = " --preset tiny --batch 4 --steps 6 --seed 3";
}  // namespace

TEST(WriteErrors, AFullDiskUnderMetricsStopsTheRunWithACheckpoint) {
  ASSERT_TRUE(fs::exists("/dev/full"));
  TempDir tmp("write-metrics");
  write_rows(tmp.str("rows.bin"), 48);
  const std::string data = kArgs + " --rows " + tmp.str("rows.bin");
  ASSERT_EQ(run("train" + data + " --out " + tmp.str("straight")).code, 0);
  const std::string out = tmp.str("run");
  fs::create_directories(out);
  fs::create_symlink("/dev/full", out + "/metrics.jsonl");
  auto r = run("train" + data + " --out " + out);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(out +
                       "/metrics.jsonl: cannot write: No space left on device; stopped with "
                       "a checkpoint (" +
                       out + "/checkpoints/step-00000001 at step 1)"),
            std::string::npos)
      << r.out;
  auto ck = marin::latest_checkpoint(out);
  ASSERT_TRUE(ck.has_value());
  EXPECT_EQ(marin::read_run_state(*ck).step, 1);
  // With room again the run resumes and loses no training.
  fs::remove(out + "/metrics.jsonl");
  r = run("train --resume " + out);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(final_weights(out), final_weights(tmp.str("straight")));
  const auto m = metrics(out);
  ASSERT_EQ(m.size(), 5u);  // steps 1..5; step 0's line is what the full disk refused
  EXPECT_EQ(m.front()["step"], 1);
}

TEST(WriteErrors, AReportThatCannotReachStdoutIsAnError) {
  TempDir tmp("write-stdout");
  write_rows(tmp.str("rows.bin"), 16);
  ASSERT_EQ(
      run("train" + kArgs + " --rows " + tmp.str("rows.bin") + " --out " + tmp.str("run")).code,
      0);
  const std::string ck = *marin::latest_checkpoint(tmp.str("run"));
  const std::string score =
      std::string(MARIN_BIN) + " score --checkpoint " + ck + " --rows " + tmp.str("rows.bin");
  EXPECT_EQ(run_shell(score + " >/dev/null").code, 0);
  auto r = run_shell("(" + score + " >/dev/full)");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot write the output (stdout): No space left on device"),
            std::string::npos)
      << r.out;
}
