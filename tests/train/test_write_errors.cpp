// Failed writes are never silent (docs/reliability.md, "Writes"): a metrics line that does not
// reach the disk stops the run with a checkpoint and a message naming the file, and a report on
// stdout that cannot be written is a non-zero exit. /dev/full fails every write with ENOSPC, as
// a full filesystem does, and works as root (where a read-only file would not).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
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
  ASSERT_EQ(m.size(), 5u);  // steps 2..6; step 1's line is what the full disk refused
  EXPECT_EQ(m.front()["step"], 2);
}

TEST(WriteErrors, AReportThatCannotReachStdoutIsAnError) {
  TempDir tmp("write-stdout");
  write_rows(tmp.str("rows.bin"), 16);
  ASSERT_EQ(
      run("train" + kArgs + " --rows " + tmp.str("rows.bin") + " --out " + tmp.str("run")).code, 0);
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

// An output path that names a device, FIFO or socket is written in place, never replaced by the
// atomic write's rename (docs/reliability.md, "Writes"): as root, a rename over /dev/null would
// turn the system's null device into a regular file. The nodes are made in a temp dir.
namespace {
bool is_char_device(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const marin::Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Outputs, ADeviceNodeIsWrittenInPlaceAndKept) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod of a character device needs root";
  TempDir tmp("out-device");
  const std::string null = tmp.str("null"), full = tmp.str("full");
  ASSERT_EQ(::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  ASSERT_EQ(::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
  marin::write_file_atomic(null, "written into the null device");
  EXPECT_TRUE(is_char_device(null));
  // A device that fails the write is an error naming it, and stays a device.
  EXPECT_NE(error_of([&] {
              marin::write_file_atomic(full, "x");
            }).find("cannot write " + full + ": No space left on device"),
            std::string::npos);
  EXPECT_TRUE(is_char_device(full));
  // Through a link too (/dev/stdout is one): the link and the device are both kept.
  fs::create_symlink(null, tmp.str("link"));
  marin::write_file_atomic(tmp.str("link"), "via the link");
  EXPECT_TRUE(fs::is_symlink(tmp.str("link")));
  EXPECT_TRUE(is_char_device(null));
  EXPECT_TRUE(fs::directory_iterator(tmp.path) != fs::directory_iterator());
  for (const auto& e : fs::directory_iterator(tmp.path))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(Outputs, AFifoIsWrittenInPlaceForItsReader) {
  TempDir tmp("out-fifo");
  const std::string fifo = tmp.str("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] {
    std::ifstream in(fifo, std::ios::binary);
    got.assign(std::istreambuf_iterator<char>(in), {});
  });
  marin::write_file_atomic(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST(Outputs, ADirectoryIsRefusedAndARegularFileStillReplacedAtomically) {
  TempDir tmp("out-dir");
  EXPECT_NE(error_of([&] {
              marin::write_file_atomic(tmp.str(), "x");
            }).find("cannot write " + tmp.str() + ": it is a directory"),
            std::string::npos);
  marin::write_file_atomic(tmp.str("f"), "old");
  marin::write_file_atomic(tmp.str("f"), "new");
  EXPECT_EQ(marin::read_file(tmp.str("f")), "new");
}

TEST(Outputs, AJsonReportGoesToDevStdout) {
  TempDir tmp("out-stdout");
  const std::string data = kArgs + " --rows " + tmp.str("rows.bin");
  write_rows(tmp.str("rows.bin"), 16);
  ASSERT_EQ(run("train" + data + " --out " + tmp.str("run")).code, 0);
  auto r = run_shell(std::string(MARIN_BIN) + " report " + tmp.str("run") +
                     " --out /dev/stdout 2>/dev/null | head -c 15");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("<!doctype html>"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists("/dev/null") && !fs::is_regular_file("/dev/null"));
}
