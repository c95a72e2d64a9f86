// Resume checks what it resumes from (docs/reliability.md, "Resume"): state.json carries its own
// checksum, every field is checked against config.json and the data, a damaged, truncated, empty
// or inconsistent newest checkpoint falls back to the previous one with a warning naming the
// file and the field, and a rows file replaced since the run started is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "data/batch_source.hpp"
#include "train/run_checkpoint.hpp"
#include "train/run_state_check.hpp"
#include "train/train_options.hpp"

using marin::testing::error_of;
using marin::testing::final_weights;
using marin::testing::metrics;
using marin::testing::run;
using marin::testing::TempDir;
using marin::testing::write_rows;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kArgs = " --preset tiny --batch 4 --steps 10 --seed 3 --keep-every 5";

// A run of 10 steps with checkpoints at 5 and 10, and the same run uninterrupted (the reference
// for "nothing lost"), trained once for the whole file.
class ResumeState : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir("resume-state");
    write_rows(tmp_->str("rows.bin"), 48);
    auto r =
        run("train" + kArgs + " --rows " + tmp_->str("rows.bin") + " --out " + tmp_->str("run"));
    ASSERT_EQ(r.code, 0) << r.out;
  }
  static void TearDownTestSuite() { delete tmp_; }

  // A copy of the run whose newest checkpoint (step 10) is changed by `damage`, then resumed:
  // the resume must come from step 5 with a warning that contains `warning`, and end with the
  // same weights as the untouched run.
  void expect_fallback(const std::string& name,
                       const std::function<void(const std::string&)>& damage,
                       const std::string& warning) {
    const std::string dir = tmp_->str(name);
    fs::copy(tmp_->str("run"), dir, fs::copy_options::recursive);
    const std::string newest = dir + "/checkpoints/step-00000010";
    damage(newest);
    auto r = run("train --resume " + dir);
    EXPECT_EQ(r.code, 0) << name << "\n" << r.out;
    EXPECT_NE(r.out.find("warning: skipping checkpoint " + newest + ": "), std::string::npos)
        << name << "\n"
        << r.out;
    EXPECT_NE(r.out.find(warning), std::string::npos) << name << "\n" << r.out;
    EXPECT_NE(r.out.find("from " + dir + "/checkpoints/step-00000005 (step 5"), std::string::npos)
        << name << "\n"
        << r.out;
    EXPECT_EQ(final_weights(dir), final_weights(tmp_->str("run"))) << name;
    EXPECT_EQ(metrics(dir).size(), 10u) << name;
  }

  static TempDir* tmp_;
};
TempDir* ResumeState::tmp_ = nullptr;

// Rewrites DIR/state.json after `edit`, with a correct checksum (as a writer with a bug would).
void edit_state(const std::string& ckpt, const std::function<void(json&)>& edit) {
  const std::string path = ckpt + "/state.json";
  json j = json::parse(marin::read_file(path));
  edit(j);
  j["state_xxh64"] = marin::state_checksum(j);
  std::ofstream(path) << j.dump(2) << "\n";
}

}  // namespace

TEST_F(ResumeState, DamagedStateFallsBackToThePreviousCheckpoint) {
  expect_fallback(
      "empty", [](const std::string& c) { std::ofstream(c + "/state.json", std::ios::trunc); },
      "step-00000010/state.json: empty (expected the checkpoint's state)");
  expect_fallback(
      "truncated",
      [](const std::string& c) {
        const std::string s = marin::read_file(c + "/state.json");
        std::ofstream(c + "/state.json", std::ios::trunc) << s.substr(0, s.size() / 2);
      },
      "step-00000010/state.json: not valid JSON");
  // Nested past the JSON policy's limit, with a valid checksum: refused at parse time as damage
  // (it once overflowed the stack of `train --resume`), so the resume falls back. Just past the
  // limit: the test's own recursive dump of a deeper document overflows an ASan-sized stack.
  expect_fallback(
      "nested",
      [](const std::string& c) {
        edit_state(c, [](json& j) {
          json deep = "root";
          for (int i = 0; i < 300; ++i) deep = json::array({deep});
          j["lineage"] = deep;
        });
      },
      "): nested deeper than 256 levels (the limit for every JSON file marin reads)");
  // A changed value without a matching checksum: the state is damaged.
  expect_fallback(
      "flipped",
      [](const std::string& c) {
        json j = json::parse(marin::read_file(c + "/state.json"));
        j["data"]["next_row"] = 12;
        std::ofstream(c + "/state.json", std::ios::trunc) << j.dump(2);
      },
      "step-00000010/state.json: checksum mismatch (state_xxh64 says");
  // The rest has a valid checksum but inconsistent fields.
  expect_fallback(
      "next-row",
      [](const std::string& c) { edit_state(c, [](json& j) { j["data"]["next_row"] = -1000; }); },
      "state.json: data.next_row = -1000 is inconsistent (expected a row in [0, 48))");
  expect_fallback(
      "step", [](const std::string& c) { edit_state(c, [](json& j) { j["step"] = 7; }); },
      "state.json: data.next_row = 40 is inconsistent (expected 28 (step 7 × batch 4 mod 48 "
      "rows))");
  expect_fallback(
      "step-range", [](const std::string& c) { edit_state(c, [](json& j) { j["step"] = 11; }); },
      "state.json: step = 11 is inconsistent (expected a value in [0, options.steps = 10])");
  expect_fallback(
      "batch",
      [](const std::string& c) { edit_state(c, [](json& j) { j["options"]["batch"] = 8; }); },
      "state.json: data.next_row = 40 is inconsistent (expected 32 (step 10 × batch 8");
  expect_fallback(
      "rate",
      [](const std::string& c) {
        edit_state(c, [](json& j) { j["options"]["optimizer"]["muonh_lr"] = 1e30; });
      },
      "state.json: options.optimizer.muonh_lr = 1e+30 is invalid (expected a value in [0, "
      "1])");
  expect_fallback(
      "threads",
      [](const std::string& c) { edit_state(c, [](json& j) { j["threads"] = 100000; }); },
      "state.json: threads = 100000 is invalid (expected a value in [0, 1024]; 0: not recorded)");
  expect_fallback(
      "files", [](const std::string& c) { edit_state(c, [](json& j) { j.erase("files"); }); },
      "state.json: files.model.safetensors: missing checksum");
  expect_fallback(
      "config",
      [](const std::string& c) {
        json j = json::parse(marin::read_file(c + "/config.json"));
        j["rope_theta"] = 20000.0;
        std::ofstream(c + "/config.json", std::ios::trunc) << j.dump(2);
      },
      "step-00000010/config.json: rope_theta = 20000.0 but state.json's options.model says "
      "10000.0");
}

TEST_F(ResumeState, NoGoodCheckpointIsAnErrorNamingTheNewest) {
  const std::string dir = tmp_->str("none");
  fs::copy(tmp_->str("run"), dir, fs::copy_options::recursive);
  for (const char* step : {"step-00000005", "step-00000010"})
    std::ofstream(dir + "/checkpoints/" + step + "/state.json", std::ios::trunc);
  auto r = run("train --resume " + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(dir + ": no checkpoint passes the checks for a resume; the newest: " + dir +
                       "/checkpoints/step-00000010/state.json: empty"),
            std::string::npos)
      << r.out;
  // latest_checkpoint skips them too instead of throwing a JSON parse error.
  EXPECT_FALSE(marin::latest_checkpoint(dir).has_value());
}

TEST_F(ResumeState, AReplacedRowsFileIsRefused) {
  const std::string dir = tmp_->str("rows-replaced");
  fs::copy(tmp_->str("run"), dir, fs::copy_options::recursive);
  // The rows the run trained on, replaced by others of the same size.
  const std::string rows = tmp_->str("rows.bin");
  const std::string before = marin::read_file(rows);
  write_rows(rows, 48, 64, 512, /*seed=*/7);
  ASSERT_EQ(marin::read_file(rows).size(), before.size());
  auto r = run("train --resume " + dir);
  std::ofstream(rows, std::ios::binary | std::ios::trunc) << before;
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(rows + ": the rows file changed since the run started (state: " +
                       std::to_string(before.size()) + " bytes, xxh64 \""),
            std::string::npos)
      << r.out;
  EXPECT_EQ(final_weights(dir), final_weights(tmp_->str("run")));  // nothing trained on them
}

TEST(RowsSourceState, OutOfRangePositionsAreRefused) {
  TempDir tmp("rows-state");
  write_rows(tmp.str("rows.bin"), 8);
  auto src = marin::make_rows_source(tmp.str("rows.bin"), 64, 512);
  for (const json& bad :
       {json{{"kind", "rows"}, {"next_row", -1000}}, json{{"kind", "rows"}, {"next_row", 8}},
        json{{"kind", "rows"}, {"next_row", "3"}}})
    EXPECT_NE(error_of([&] { src->restore(bad); }).find("rows source state: next_row = "),
              std::string::npos)
        << bad.dump();
  EXPECT_EQ(error_of([&] { src->restore({{"kind", "rows"}, {"next_row", 7}}); }), "");
}

// An option absent from an older run.json takes what that run computed with where the default
// has changed since (--ns-dtype: fp32 until 2026-12-07, now the compute dtype), else today's
// default: a resumed run keeps its numerics.
TEST(TrainOptions, AnOptionAnOlderRunLacksTakesWhatThatRunComputedWith) {
  const marin::TrainOptions today;
  json j = today.to_json();
  EXPECT_EQ(j["optimizer"]["ns_dtype"], "compute");
  EXPECT_EQ(marin::TrainOptions::from_json(j).optim.ns_dtype, "compute");
  j["optimizer"].erase("ns_dtype");
  j.erase("strict_data");
  const auto older = marin::TrainOptions::from_json(j);
  EXPECT_EQ(older.optim.ns_dtype, "fp32");
  EXPECT_EQ(older.strict_data, today.strict_data);
  j.erase("steps");  // not optional: an error naming it
  EXPECT_NE(error_of([&] { marin::TrainOptions::from_json(j, "run.json"); }).find("run.json.steps"),
            std::string::npos);
}
