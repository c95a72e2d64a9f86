// Regressions of the hostile probe (issue 37): each input that once crashed, hung, replaced a
// file or was accepted silently now gets a clear error naming what is wrong
// (docs/reliability.md). The JSON policy, the device-node outputs and the report's escaping have
// their tests beside their modules (test_formats, test_write_errors, test_report).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include <fmt/core.h>

#include "cli_util.hpp"
#include "core/fileio.hpp"
#include "core/limits.hpp"
#include "data/mixture.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "scaling/ladder.hpp"
#include "train/safetensors.hpp"

using marin::testing::error_of;
using marin::testing::mpirun_command;
using marin::testing::run;
using marin::testing::run_shell;
using marin::testing::TempDir;
using marin::testing::write_rows;
namespace fs = std::filesystem;

namespace {
bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
}  // namespace

TEST(Bounds, ASafetensorsHeaderOfTooManyEntriesIsRefused) {
  std::string json = "{";
  for (size_t i = 0; i <= marin::kMaxSafetensorsEntries; ++i)
    json += fmt::format("{}\"t{}\":{{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
                        i ? "," : "", i);
  json += "}";
  std::string bytes(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += json;
  const std::string err = error_of([&] { marin::parse_safetensors(bytes, "many.safetensors"); });
  EXPECT_TRUE(has(err,
                  "many.safetensors: the header lists 250001 tensors, more than the limit "
                  "of 250000"))
      << err;
}

TEST(Bounds, AMixtureOfTooManySourcesIsRefused) {
  std::string toml = "[[phase]]\nweights = { d0 = 1";
  for (size_t i = 1; i <= marin::kMaxMixtureSources; ++i) toml += fmt::format(", d{} = 0", i);
  toml += " }\n";
  const std::string err =
      error_of([&] { marin::MixtureConfig::from_toml_text(toml, "mix.toml").validate(); });
  EXPECT_TRUE(has(err, "mixture mix.toml: 10001 sources, more than the limit of 10000")) << err;
}

TEST(Bounds, ALadderOfTooManyRunsIsRefusedBeforeBuildingRungs) {
  std::string text = marin::read_file(std::string(MARIN_SOURCE_DIR) + "/configs/ladder_tiny.toml");
  const size_t at = text.find("seed = 1\n");
  ASSERT_NE(at, std::string::npos);
  std::string seeds = "seeds = [1";
  for (int s = 2; s <= 300; ++s) seeds += fmt::format(", {}", s);
  text.replace(at, 9, seeds + "]\n");
  // 4 rungs × 300 seeds = 1200 runs.
  const std::string err =
      error_of([&] { marin::scaling::LadderConfig::from_toml_text(text, "big.toml"); });
  EXPECT_TRUE(has(err,
                  "big.toml [ladder]: 1200 runs (rungs × token budgets × seeds), more than "
                  "the limit of 1000"))
      << err;
}

// A ladder.json written or edited by hand is not bounded by the ladder file's check: `marin
// forecast` refuses one of more runs than a ladder may have before fitting anything.
TEST(Bounds, AForecastOfTooManyRunsIsRefused) {
  TempDir tmp("forecast-runs");
  std::string rungs;
  for (size_t i = 0; i <= marin::kMaxLadderRuns; ++i)
    rungs += fmt::format("{}{{\"name\": \"r{}\", \"status\": \"done\"}}", i ? "," : "", i);
  marin::write_file_atomic(
      tmp.str("ladder.json"),
      R"({"format": "marin-ladder-v1", "ladder": {"tokens_per_param": 2}, "rungs": [)" + rungs +
          "]}");
  const auto r = run("forecast --ladder " + tmp.str() + " --preset tiny --target-steps 20 --out " +
                     tmp.str("f.json"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, tmp.str("ladder.json") +
                             ": 1001 runs in \"rungs\", more than the limit of 1000 for one "
                             "ladder (kMaxLadderRuns)"))
      << r.out;
  EXPECT_FALSE(fs::exists(tmp.str("f.json")));
}

// `tokenizer encode` of one 100 MB word once took 2 GB and more than 120 s; a pre-tokenized piece
// longer than kMaxWordBytes is refused, after one pass over the text.
TEST(Bounds, ATokenizerEncodeOfOneHugeWordIsRefusedPastTheWordLimit) {
  TempDir tmp("huge-word");
  marin::Tokenizer::train({"the cat sat on the mat", "a dog and a cat"}, 262)
      .save_json(tmp.str("tok.json"));
  const size_t bytes = size_t(100) << 20;
  static_assert((size_t(100) << 20) > marin::kMaxWordBytes);
  std::ofstream(tmp.str("word.txt"), std::ios::binary) << std::string(bytes, 'a');
  const auto start = std::chrono::steady_clock::now();
  const auto r =
      run("tokenizer encode --tokenizer " + tmp.str("tok.json") + " --in " + tmp.str("word.txt"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out,
                  "a pre-tokenized piece of 104857600 bytes is longer than the limit of 16 "
                  "MiB (kMaxWordBytes"))
      << r.out;
  EXPECT_LT(seconds, 30) << "the refusal should come after one pass over the text";
}

// A tokenizer.json of 100,000 nested `Sequence` pre-tokenizers once overflowed the stack of the
// recursive pipeline reader; the JSON policy's nesting limit refuses it while parsing.
TEST(Bounds, ATokenizerJsonOfDeeplyNestedSequencesIsRefusedByTheNestingLimit) {
  TempDir tmp("nested-sequence");
  marin::Tokenizer::train({"the cat sat on the mat", "a dog and a cat"}, 262)
      .save_json(tmp.str("tok.json"));
  std::string text = marin::read_file(tmp.str("tok.json"));
  const size_t at = text.find("\"pre_tokenizer\":");
  ASSERT_NE(at, std::string::npos) << text.substr(0, 400);
  std::string nested;
  const int depth = 100000;
  for (int i = 0; i < depth; ++i) nested += R"({"type": "Sequence", "pretokenizers": [)";
  nested += R"({"type": "Whitespace"})";
  for (int i = 0; i < depth; ++i) nested += "]}";
  text.insert(at + std::strlen("\"pre_tokenizer\":"), nested + ", \"unused\":");
  marin::write_file_atomic(tmp.str("nested.json"), text);
  marin::write_file_atomic(tmp.str("in.txt"), "the cat\n");
  const auto r =
      run("tokenizer encode --tokenizer " + tmp.str("nested.json") + " --in " + tmp.str("in.txt"));
  EXPECT_EQ(r.code, 1) << r.out.substr(0, 2000);
  EXPECT_TRUE(has(r.out, tmp.str("nested.json") + "': not valid JSON")) << r.out.substr(0, 2000);
  EXPECT_TRUE(
      has(r.out, "nested deeper than 256 levels (the limit for every JSON file marin reads)"))
      << r.out.substr(0, 2000);
}

TEST(SilentAcceptance, ABf16ExportOfAWeightBeyondBf16sRangeIsRefusedOrSaturated) {
  TempDir tmp("bf16-overflow");
  ASSERT_EQ(run("init --preset tiny --seed 1 --out " + tmp.str("ck")).code, 0);
  const std::string model = tmp.str("ck/model.safetensors");
  marin::SafetensorsFile f = marin::read_safetensors(model);
  const std::string name = f.names.front();
  f.tensors[name].data[3] = -3.4e38f;  // finite in fp32, rounds to -inf in bf16
  std::vector<marin::TensorView> views;
  for (const std::string& n : f.names)
    views.push_back({n, f.tensors[n].shape, f.tensors[n].data.data()});
  marin::write_safetensors(model, views, f.metadata);
  auto r = run("export --checkpoint " + tmp.str("ck") + " --dtype bf16 --out " + tmp.str("hf"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "element 3 is -3.4e+38, beyond bf16's largest finite value")) << r.out;
  EXPECT_TRUE(has(r.out, "--bf16-overflow saturate")) << r.out;
  r = run("export --checkpoint " + tmp.str("ck") + " --dtype bf16 --bf16-overflow saturate --out " +
          tmp.str("hf2"));
  ASSERT_EQ(r.code, 0) << r.out;
  // The saturated value is bf16's largest finite one, -0x1.fep127 = -3.3895e38.
  bool found = false;
  for (const auto& e : fs::directory_iterator(tmp.str("hf2")))
    if (e.path().extension() == ".safetensors")
      for (const auto& [n, t] : marin::read_safetensors(e.path().string()).tensors)
        for (float v : t.data) {
          EXPECT_TRUE(std::isfinite(v)) << n;
          found = found || v == -0x1.fep127f;
        }
  EXPECT_TRUE(found);
}

TEST(SilentAcceptance, ANegativeMaxTokensIsRefused) {
  const auto r = run("eval --checkpoint nowhere --corpus nowhere --max-tokens -5");
  EXPECT_NE(r.code, 0);
  EXPECT_TRUE(has(r.out, "--max-tokens")) << r.out;
}

TEST(InternalErrors, ALatestLinkLoopIsAMessage) {
  TempDir tmp("link-loop");
  fs::create_directory_symlink("latest", tmp.str("latest"));
  write_rows(tmp.str("rows.bin"), 4);
  const auto r = run("score --checkpoint " + tmp.str("latest") + " --rows " + tmp.str("rows.bin"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "marin: error: ")) << r.out;
  EXPECT_TRUE(has(r.out, "Too many levels of symbolic links")) << r.out;
  EXPECT_FALSE(has(r.out, "internal error")) << r.out;
}

// Ranks launched with different options end at once, naming the option, instead of waiting for
// each other forever (different transports or --ep) or each training something else.
TEST(RanksAgree, DifferentOptionsOnTwoRanksEndTheJobNamingThem) {
  TempDir tmp("ranks-agree");
  write_rows(tmp.str("rows.bin"), 16);
  const std::string common = " train --preset tiny --batch 4 --steps 2 --rows " +
                             tmp.str("rows.bin") + " --out " + tmp.str("run");
  const std::string mpi = std::string(MARIN_MPIEXEC) +
                          " --allow-run-as-root --oversubscribe --bind-to none -x "
                          "OMP_NUM_THREADS=1 ";
  for (const auto& [a, b, name] :
       {std::tuple{"--transport dropless", "--transport capacity", "transport (rank 0: "},
        std::tuple{"--ep 1", "--ep 2", "ep (rank 0: 1)"},
        std::tuple{"--seed 1", "--seed 2", "seed (rank 0: 1)"}}) {
    fs::remove_all(tmp.str("run"));
    const auto r = run_shell("timeout 120 " + mpi + "-np 1 " + MARIN_BIN + common + " " + a +
                             " : -np 1 " + MARIN_BIN + common + " " + b);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(r.code, 124) << "the ranks hung: " << r.out;
    EXPECT_TRUE(has(r.out, "the ranks were started with different options: ")) << r.out;
    EXPECT_TRUE(has(r.out, name)) << name << "\n" << r.out;
  }
  // The same command on both ranks still trains.
  fs::remove_all(tmp.str("run"));
  const auto r = run_shell("timeout 300 " + mpirun_command(2) + common);
  EXPECT_EQ(r.code, 0) << r.out;
}
