// What a new user meets first: one name per concept with the old spellings still working, the
// rows a user can make (marin rows), checkpoints/latest, and the training options declared once
// (train_option_table.hpp) from which the flags, run.json and the resume rules all come.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "data/shards.hpp"
#include "data/token_rows.hpp"
#include "train/train_option_table.hpp"
#include "train/train_options.hpp"

namespace fs = std::filesystem;
using marin::testing::run;
using marin::testing::RunResult;
using marin::testing::TempDir;
using marin::testing::write_rows;
using nlohmann::json;

namespace {

const std::string kFixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";

void expect_deprecated(const RunResult& r, const std::string& old_flag, const std::string& flag) {
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: " + old_flag + " is deprecated; use " + flag), std::string::npos)
      << r.out;
}

}  // namespace

TEST(FirstHour, EveryOldSpellingStillWorksAndNamesTheNewOne) {
  TempDir tmp("names");
  const std::string kjv = kFixture + "/bible_kjv/train-00000.jsonl";
  expect_deprecated(
      run("tokenizer train --vocab 300 --in " + kjv + " --out " + tmp.str("tok.json")), "--vocab",
      "--vocab-size");
  expect_deprecated(run("tokenizer encode --vocab " + tmp.str("tok.json") + " --in " + kjv),
                    "--vocab", "--tokenizer");
  expect_deprecated(run("tokenize --vocab " + tmp.str("tok.json") + " --corpus " + kFixture +
                        " --split valid --out " + tmp.str("tokens")),
                    "--vocab", "--tokenizer");
  expect_deprecated(run("bench tokenizer --vocab " + tmp.str("tok.json") + " --in " + kjv +
                        " --iters 1 --warmup 0"),
                    "--vocab", "--tokenizer");
  write_rows(tmp.str("rows.bin"), 8, 64, 300);
  expect_deprecated(run("train --preset tiny --set vocab_size=300 --batch 4 --steps 2 --tokens " +
                        tmp.str("rows.bin") + " --valid-tokens " + tmp.str("rows.bin") + " --out " +
                        tmp.str("run")),
                    "--valid-tokens", "--valid-rows");
  RunResult r = run("train --preset tiny --set vocab_size=300 --batch 4 --steps 2 --tokens " +
                    tmp.str("rows.bin") + " --out " + tmp.str("run2"));
  expect_deprecated(r, "--tokens", "--rows");
  const std::string ck = tmp.str("run/checkpoints/latest");
  expect_deprecated(run("eval --checkpoint " + ck + " --tokens " + tmp.str("tokens") +
                        " --domains fortunes --no-audit --quiet --max-tokens 256"),
                    "--tokens", "--token-dir");
  // The new spellings, and an error that names the new one when neither is given.
  r = run("tokenizer encode --in " + kjv);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--tokenizer FILE"), std::string::npos) << r.out;
  r = run("tokenize --corpus " + kFixture + " --out " + tmp.str("t2"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--tokenizer FILE"), std::string::npos) << r.out;
  // The old spellings are not advertised.
  r = run("train --help");
  EXPECT_EQ(r.out.find("--tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--rows"), std::string::npos) << r.out;
}

TEST(FirstHour, LatestPointsAtTheNewestCheckpointAndMovesWithIt) {
  TempDir tmp("latest");
  write_rows(tmp.str("rows.bin"), 16);
  const std::string dir = tmp.str("run");
  ASSERT_EQ(run("train --preset tiny --batch 4 --steps 4 --ckpt-every 2 --rows " +
                tmp.str("rows.bin") + " --out " + dir)
                .code,
            0);
  const fs::path latest = fs::path(dir) / "checkpoints/latest";
  ASSERT_TRUE(fs::is_symlink(latest));
  EXPECT_EQ(fs::read_symlink(latest).string(), "step-00000004");  // relative: the run can move
  RunResult r = run("score --checkpoint " + latest.string() + " --rows " + tmp.str("rows.bin"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("train --resume " + dir + " --steps 6");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(fs::read_symlink(latest).string(), "step-00000006");
  // The link is no checkpoint of its own: pruning and resume see step directories only.
  EXPECT_EQ(marin::checkpoint_dirs(dir).size(), 1u);
  // A fork from the link starts at its step.
  r = run("train --fork-from " + latest.string() + " --steps 8 --out " + tmp.str("fork"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(fs::read_symlink(tmp.str("fork/checkpoints/latest")).string(), "step-00000008");
}

TEST(FirstHour, RowsFromTokenShardsAreTheirDocumentsInOrder) {
  TempDir tmp("rows-shards");
  ASSERT_EQ(marin::testing::tokenize_fixture(tmp), "");
  RunResult r =
      run("rows --token-dir " + tmp.str("tokens") +
          " --domains fortunes,bible_kjv --split valid --seq-len 32 --out " + tmp.str("rows.bin"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = json::parse(r.out.substr(r.out.rfind('{')));
  // The expected stream: every document of the two domains' valid shards, in that order.
  const marin::TokenManifest man = marin::TokenManifest::load(tmp.str("tokens"));
  std::vector<uint32_t> stream;
  int64_t documents = 0;
  for (const std::string d : {"fortunes", "bible_kjv"})
    for (const auto& info : man.find(d, "valid")) {
      const marin::TokenShard s = man.open(info, man.tokenizer_hash);
      for (uint64_t i = 0; i < s.documents(); ++i, ++documents) {
        const auto doc = s.document(i);
        stream.insert(stream.end(), doc.begin(), doc.end());
      }
    }
  const int64_t rows = int64_t(stream.size()) / 33;
  ASSERT_GT(rows, 0);
  EXPECT_EQ(j["rows"].get<int64_t>(), rows);
  EXPECT_EQ(j["documents"].get<int64_t>(), documents);
  EXPECT_EQ(j["dropped_tokens"].get<int64_t>(), int64_t(stream.size()) - rows * 33);
  const marin::TokenRows got = marin::TokenRows::load(tmp.str("rows.bin"), 32, man.vocab_size);
  ASSERT_EQ(got.rows, rows);
  EXPECT_TRUE(std::equal(got.ids.begin(), got.ids.end(), stream.begin()));
  // Without --domains: every domain that has the split (eval-only domains have no train split).
  r = run("rows --token-dir " + tmp.str("tokens") + " --split train --seq-len 32 --out " +
          tmp.str("train.bin"));
  ASSERT_EQ(r.code, 0) << r.out;
  // --max-rows stops early; the rows feed score and train as they are.
  r = run("rows --token-dir " + tmp.str("tokens") + " --seq-len 32 --max-rows 3 --out " +
          tmp.str("three.bin"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(fs::file_size(tmp.str("three.bin")), 3u * 33 * 4);
  ASSERT_EQ(run("init --preset tiny --set seq_len=32 --out " + tmp.str("ck")).code, 0);
  r = run("score --checkpoint " + tmp.str("ck") + " --rows " + tmp.str("rows.bin"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(json::parse(r.out.substr(r.out.rfind('{')))["tokens"].get<int64_t>(), rows * 32);
  // A checkpoint gives the row length; a domain that is not there is named.
  r = run("rows --token-dir " + tmp.str("tokens") + " --checkpoint " + tmp.str("ck") +
          " --domains nowhere --out " + tmp.str("x.bin"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("'nowhere'"), std::string::npos) << r.out;
  r = run("rows --token-dir " + tmp.str("tokens") + " --out " + tmp.str("x.bin"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--seq-len S or --checkpoint CK"), std::string::npos) << r.out;
}

TEST(FirstHour, RowsFromTextEncodeEachDocumentWithItsEos) {
  TempDir tmp("rows-text");
  ASSERT_EQ(marin::testing::tokenize_fixture(tmp), "");
  // The same documents through tokenize and through rows --in: the same ids.
  const std::string shard = kFixture + "/fortunes/valid-00000.jsonl";
  RunResult r = run("rows --tokenizer " + tmp.str("tok.json") + " --in " + shard +
                    " --seq-len 16 --out " + tmp.str("text.bin"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("rows --token-dir " + tmp.str("tokens") + " --domains fortunes --seq-len 16 --out " +
          tmp.str("shards.bin"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(marin::read_file(tmp.str("text.bin")), marin::read_file(tmp.str("shards.bin")));
  r = run("rows --in " + shard + " --seq-len 16 --out " + tmp.str("y.bin"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--tokenizer FILE"), std::string::npos) << r.out;
}

TEST(FirstHour, EveryTrainingOptionIsDeclaredOnceWithItsRangeAndResumeRule) {
  using marin::TrainOption;
  const RunResult help = run("train --help");
  const marin::TrainOptions defaults;
  const json j = defaults.to_json();
  for (const TrainOption& s : marin::train_option_table()) {
    if (s.flag) {
      EXPECT_NE(help.out.find(s.flag), std::string::npos) << s.flag;
    }
    if (!s.key) continue;
    // Stored, read back, and range-checked on the way in, naming the field.
    const json::json_pointer at(s.key);
    ASSERT_TRUE(j.contains(at)) << s.key;
    if (s.kind == TrainOption::Int || s.kind == TrainOption::Real) {
      json bad = j;
      bad[at] = s.hi * 2 + 1;
      EXPECT_NE(marin::testing::error_of([&] {
                  marin::TrainOptions::from_json(bad, "x: options");
                }).find("x: options." + s.dotted_key() + " = "),
                std::string::npos)
          << s.key;
    }
  }
  EXPECT_EQ(marin::TrainOptions::from_json(j).to_json(), j);
  // A run.json from before an optional option: its default; a required one missing is named.
  json old = j;
  old.erase("ep");
  EXPECT_EQ(marin::TrainOptions::from_json(old).ep, 1);
  old.erase("batch");
  EXPECT_NE(marin::testing::error_of([&] {
              marin::TrainOptions::from_json(old);
            }).find("options.batch is missing"),
            std::string::npos);
  // The resume rules: the help says which may change.
  EXPECT_NE(help.out.find("(may change on --resume)"), std::string::npos) << help.out;
}
