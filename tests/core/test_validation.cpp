// Bounds on every size and number a user gives (docs/reliability.md): config field ranges,
// checked 64-bit products, required config fields, allocations refused against the machine's
// memory, non-regular input files, manifests cross-checked against their files, corpus
// checksums, and numeric CLI options. Each case is driven as a user would (the real binary)
// where it can be, and fails with a message naming the field, option or file.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/fileio.hpp"
#include "core/limits.hpp"
#include "data/corpus/corpus.hpp"
#include "data/shards.hpp"
#include "data/token_rows.hpp"
#include "model/accounting.hpp"
#include "model/config.hpp"
#include "model/model.hpp"

using namespace marin;
using marin::testing::error_of;
using marin::testing::run;
using marin::testing::RunResult;
using marin::testing::TempDir;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `marin ARGS` killed after `seconds` (a hang reads as exit code 124, not as a stuck suite).
RunResult run_with_timeout(const std::string& args, int seconds = 30) {
  return marin::testing::run_shell("timeout " + std::to_string(seconds) + " " +
                                   std::string(MARIN_BIN) + " " + args);
}

// A model config as a TOML file with every field of `c` except `drop`.
void write_config_toml(const std::string& path, const ModelConfig& c, const std::string& drop) {
  std::ofstream f(path);
  const json fields = c.to_json();  // named: items() of a temporary would dangle
  for (auto& [k, v] : fields.items()) {
    if (k == drop) continue;
    if (v.is_array()) {
      f << k << " = [";
      for (size_t i = 0; i < v.size(); ++i) f << (i ? ", " : "") << v[i].dump();
      f << "]\n";
    } else if (v.is_number_float()) {
      f << k << " = " << fmt::format("{:e}", v.get<double>()) << "\n";
    } else {
      f << k << " = " << v.dump() << "\n";
    }
  }
}

// A small token directory: domain "a", one train and one valid shard, and its manifest.
TokenManifest make_token_dir(const std::string& dir) {
  TokenManifest m;
  m.dir = dir;
  m.tokenizer_hash = 0x1234;
  m.vocab_size = 300;
  fs::create_directories(dir + "/a");
  for (const char* split : {"train", "valid"}) {
    const std::vector<uint64_t> off{0, 3, 5};
    const std::vector<uint32_t> tok{1, 2, 3, 4, 5};
    TokenShardInfo info{fmt::format("a/{}-00000.tok", split), "a", split, 2, 5, 10};
    write_token_shard(m.path(info), m.vocab_size, m.tokenizer_hash, info.bytes, off, tok);
    m.shards.push_back(info);
  }
  write_file_atomic(dir + "/manifest.json", m.to_json().dump(2));
  return m;
}

void write_manifest(const std::string& dir, const json& j) {
  write_file_atomic(dir + "/manifest.json", j.dump(2));
}

}  // namespace

// ---- config fields: a range each, named in the error -------------------------------------------

TEST(ConfigRanges, EveryFieldHasARangeNamedInTheError) {
  for (const std::string& k : ModelConfig::field_names()) {
    if (k == "sconv_sites") continue;  // a list of names, checked by name
    ModelConfig c = ModelConfig::preset("tiny");
    const bool real = c.to_json()[k].is_number_float();
    c.set(k, real ? "nan" : "-1");
    const std::string e = error_of([&] { c.validate(); });
    EXPECT_TRUE(has(e, k + " = ") && has(e, "is out of range")) << k << ": " << e;
  }
}

TEST(ConfigRanges, HugeSizesAreRefusedByTheirRange) {
  // num_layers = 1e9 grew memory until killed; the others ended in std::bad_alloc.
  const std::pair<const char*, const char*> cases[] = {
      {"num_layers=1000000000", "num_layers = 1000000000 is out of range [1, 4096]"},
      {"num_experts=1000000", "num_experts = 1000000 is out of range [2, 65536]"},
      {"hidden_dim=1000000000", "hidden_dim = 1000000000 is out of range [1, 1048576]"},
      {"qb_bins=1000000000000", "qb_bins = 1000000000000 is out of range [1, 16777216]"},
      {"seq_len=4611686018427387903", "seq_len = 4611686018427387903 is out of range"},
      {"capacity_factor=1e300", "capacity_factor = 1e+300 is out of range (0, 1024]"},
      {"capacity_factor=nan", "capacity_factor = nan is out of range (0, 1024]"},
      {"capacity_factor=0", "capacity_factor = 0 is out of range (0, 1024]"},
      {"rope_theta=inf", "rope_theta = inf is out of range"},
  };
  for (auto& [set, message] : cases) {
    const RunResult r = run_with_timeout(std::string("plan --preset tiny --set ") + set);
    EXPECT_EQ(r.code, 1) << set << ": " << r.out;
    EXPECT_TRUE(has(r.out, message)) << set << ": " << r.out;
  }
}

TEST(ConfigRanges, HugeSeqLenNeverReachesTheRowsReader) {
  // seq_len = 2^62 − 1 overflowed 4·(seq_len + 1) and divided by zero (SIGFPE) in TokenRows.
  TempDir tmp("v-seqlen");
  marin::testing::write_rows(tmp.str("rows.bin"), 4);
  const RunResult r = run_with_timeout(
      "train --preset tiny --set seq_len=4611686018427387903 "
      "--rows " +
      tmp.str("rows.bin") + " --steps 1 --out " + tmp.str("run"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "seq_len = 4611686018427387903 is out of range")) << r.out;
  // The reader itself computes the row size in checked arithmetic.
  const std::string e =
      error_of([&] { TokenRows::load(tmp.str("rows.bin"), (int64_t(1) << 62) - 1, 512); });
  EXPECT_TRUE(has(e, "overflows a 64-bit integer") && has(e, "seq_len")) << e;
}

// ---- checked 64-bit products --------------------------------------------------------------------

TEST(CheckedArithmetic, OverflowIsAnErrorNotAWrap) {
  EXPECT_EQ((Checked(3) * 4 + 5).get(), 17);
  EXPECT_THROW(Checked(INT64_MAX) + 1, Overflow);
  EXPECT_THROW(Checked(INT64_MIN) - 1, Overflow);
  EXPECT_THROW(Checked(int64_t(1) << 32) * (int64_t(1) << 31), Overflow);
  const std::string e = error_of([] {
    checked("the widget count", "n = 2^40",
            [] { return Checked(int64_t(1) << 40) * (int64_t(1) << 40); });
  });
  EXPECT_EQ(e, "the widget count overflows a 64-bit integer (n = 2^40); reduce these sizes");
}

TEST(CheckedArithmetic, PlanRefusesACountThatOverflowsInsteadOfPrintingANegativeOne) {
  // Every field in range, but L·E·3·l·e > 2^63: plan printed negative parameter counts.
  const RunResult r = run(
      "plan --preset tiny --set num_layers=4096 --set num_experts=65536 --set latent_dim=1048576 "
      "--set expert_dim=1048576 --json");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "overflows a 64-bit integer")) << r.out;
  EXPECT_TRUE(has(r.out, "num_experts = 65536")) << r.out;
  EXPECT_FALSE(has(r.out, "\"every_tensor_params\":-")) << r.out;
}

TEST(CheckedArithmetic, ABudgetPast2To62StepsIsRefused) {
  // tokens_per_param = 1e30 gave 20 steps (an undefined llround).
  const ModelConfig c = ModelConfig::preset("tiny");
  const std::string e = error_of([&] { steps_for_budget(c, 8, 1e30); });
  EXPECT_TRUE(has(e, "tokens per parameter") && has(e, "steps")) << e;
  EXPECT_TRUE(has(error_of([&] { steps_for_budget(c, 8, std::nan("")); }), "tokens per parameter"));
  EXPECT_GT(steps_for_budget(c, 8, 20.0), 0);
}

// ---- memory: refused before it is attempted -----------------------------------------------------

TEST(Memory, AModelOverTheMachinesMemoryIsRefusedWithTheBytesItNeeds) {
  // The 535B run's 535B parameters need terabytes; this used to end in `internal error:
  // std::bad_alloc` (or the OOM killer).
  TempDir tmp("v-mem");
  const RunResult r = run_with_timeout("init --preset hero-535b --out " + tmp.str("ckpt"), 60);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "needs ") && has(r.out, "of memory")) << r.out;
  EXPECT_FALSE(has(r.out, "internal error")) << r.out;
  // plan reports it (it allocates nothing).
  EXPECT_EQ(run("plan --preset hero-535b --json").code, 0);
  // Directly: a model whose activations alone exceed the memory.
  const std::string e = error_of([] {
    ModelConfig c = ModelConfig::preset("tiny");
    Model<float> m(c, 1 << 30);
  });
  EXPECT_TRUE(has(e, "needs ") && has(e, "of memory")) << e;
  EXPECT_GT(physical_memory_bytes(), int64_t(1) << 26);
}

// ---- required config fields ---------------------------------------------------------------------

TEST(RequiredFields, AConfigFileMissingAFieldNamesIt) {
  TempDir tmp("v-required");
  const ModelConfig tiny = ModelConfig::preset("tiny");
  for (const char* field : {"hidden_dim", "rope_theta", "vocab_size", "qk_mult"}) {
    const std::string path = tmp.str(std::string(field) + ".toml");
    write_config_toml(path, tiny, field);
    RunResult r = run("plan --config " + path);
    EXPECT_EQ(r.code, 1) << field << ": " << r.out;
    EXPECT_TRUE(has(r.out, std::string("missing config field '") + field + "'")) << r.out;
    // Named with a preset, the preset fills what the file leaves out.
    r = run("plan --preset tiny --config " + path + " --json");
    EXPECT_EQ(r.code, 0) << field << ": " << r.out;
  }
  std::ofstream(tmp.str("empty.toml")) << "# nothing\n";
  RunResult r = run("plan --config " + tmp.str("empty.toml"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "missing config field")) << r.out;
  // The full file is accepted as it is.
  write_config_toml(tmp.str("full.toml"), tiny, "");
  r = run("plan --config " + tmp.str("full.toml") + " --json");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(RequiredFields, ACheckpointConfigMissingAFieldNamesIt) {
  TempDir tmp("v-ckpt-required");
  ASSERT_EQ(run("init --preset tiny --out " + tmp.str("ckpt")).code, 0);
  json j = json::parse(read_file(tmp.str("ckpt/config.json")));
  j.erase("vocab_size");
  write_file_atomic(tmp.str("ckpt/config.json"), j.dump());
  marin::testing::write_rows(tmp.str("rows.bin"), 2);
  const RunResult r =
      run("score --checkpoint " + tmp.str("ckpt") + " --rows " + tmp.str("rows.bin"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "missing config field 'vocab_size'")) << r.out;
  write_file_atomic(tmp.str("ckpt/config.json"), "{}");
  EXPECT_TRUE(
      has(run("score --checkpoint " + tmp.str("ckpt") + " --rows " + tmp.str("rows.bin")).out,
          "missing config field"));
  // A number too large for a double is a refusal naming the file, not an internal error.
  write_file_atomic(tmp.str("ckpt/config.json"), R"({"hidden_dim": 2E999})");
  const RunResult big =
      run("score --checkpoint " + tmp.str("ckpt") + " --rows " + tmp.str("rows.bin"));
  EXPECT_EQ(big.code, 1) << big.out;
  EXPECT_TRUE(has(big.out, "config.json: not valid JSON: number overflow")) << big.out;
  EXPECT_FALSE(has(big.out, "internal error")) << big.out;
}

// ---- numeric CLI options -----------------------------------------------------------------------

TEST(CliOptions, BadNumbersAreRefusedNamingTheOptionAndTheRange) {
  TempDir tmp("v-options");
  const std::string train = "train --preset tiny --rows rows.bin --out " + tmp.str("run") + " ";
  const std::string eval = "eval --checkpoint " + tmp.str("ckpt") + " ";
  const std::pair<std::string, std::string> cases[] = {
      {train + "--adam-lr -1", "--adam-lr: -1 is out of range [0, 1]"},
      {train + "--muonh-lr nan", "--muonh-lr: nan is not a finite number"},
      {train + "--muonh-lr inf", "--muonh-lr: inf is not a finite number"},
      {train + "--muonh-lr 1e30", "--muonh-lr: 1e30 is out of range [0, 1]"},
      {train + "--adamw-wd nan", "--adamw-wd: nan is not a finite number"},
      {train + "--steps 0", "--steps: 0 is out of range [1, "},
      {train + "--steps -1", "--steps: -1 is out of range [1, "},
      {train + "--ckpt-every -1", "--ckpt-every: -1 is out of range [0, "},
      {train + "--time-limit nan", "--time-limit: nan is not a finite number"},
      {train + "--time-limit -5", "--time-limit: -5 is out of range [0, "},
      {train + "--eval-batches 0", "--eval-batches: 0 is out of range [1, "},
      {train + "--max-bad-steps 0", "--max-bad-steps: 0 is out of range [1, "},
      {train + "--batch 0", "--batch: 0 is out of range [1, "},
      {train + "--seed -1", "--seed: -1 is out of range [0, "},
      {"init --preset tiny --out x --seed -1", "--seed: -1 is out of range [0, "},
      {"plan --preset tiny --batch 0", "--batch: 0 is out of range [1, "},
      {"plan --preset tiny --tokens-per-param 1e30", "--tokens-per-param: 1e30 is out of range"},
      {eval + "--stride 0", "--stride: 0 is out of range [1, "},
      {eval + "--threads 0", "--threads: 0 is out of range [1, "},
      {eval + "--bloom-mb nan", "--bloom-mb: nan is not a finite number"},
      {eval + "--threshold nan", "--threshold: nan is not a finite number"},
      {eval + "--ngram 1000000000", "--ngram: 1000000000 is out of range [1, 1000]"},
  };
  for (auto& [args, message] : cases) {
    const RunResult r = run_with_timeout(args, 30);
    EXPECT_NE(r.code, 0) << args << ": " << r.out;
    EXPECT_TRUE(has(r.out, message)) << args << "\n  expected: " << message << "\n  got: " << r.out;
  }
  // Not an integer, or one out of range: either way refused by name.
  RunResult r = run_with_timeout(eval + "--ngram 1e9");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "--ngram: ") &&
              (has(r.out, "not an integer") || has(r.out, "out of range")))
      << r.out;
  // --init and --resume exclude each other (the checkpoint was silently ignored).
  r = run_with_timeout("train --init a --resume b");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_TRUE(has(r.out, "excludes") && has(r.out, "--init") && has(r.out, "--resume")) << r.out;
}

// ---- non-regular input files --------------------------------------------------------------------

TEST(InputFiles, AFifoIsRefusedInsteadOfBlocking) {
  TempDir tmp("v-fifo");
  const std::string fifo = tmp.str("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The library helper.
  EXPECT_TRUE(has(error_of([&] { read_file(fifo); }), "it is a FIFO"));
  EXPECT_TRUE(has(error_of([&] { open_input(tmp.str()); }), "it is a directory"));
  ASSERT_EQ(run("init --preset tiny --out " + tmp.str("ckpt")).code, 0);
  const std::string cases[] = {
      "plan --config " + fifo,
      "score --checkpoint " + tmp.str("ckpt") + " --rows " + fifo,
      "train --preset tiny --rows " + fifo + " --steps 1 --out " + tmp.str("run"),
      "tokenizer encode --tokenizer " + fifo + " --in " + fifo,
      "tokenizer train --vocab-size 300 --in " + fifo + " --out " + tmp.str("tok.json"),
  };
  for (const std::string& args : cases) {
    const RunResult r = run_with_timeout(args, 20);
    EXPECT_EQ(r.code, 1) << args << ": " << r.out;
    EXPECT_TRUE(has(r.out, fifo) && has(r.out, "FIFO")) << args << ": " << r.out;
  }
  // A FIFO in place of a checkpoint's weights.
  fs::remove(tmp.str("ckpt/model.safetensors"));
  ASSERT_EQ(::mkfifo(tmp.str("ckpt/model.safetensors").c_str(), 0600), 0);
  marin::testing::write_rows(tmp.str("rows.bin"), 2);
  const RunResult r = run_with_timeout(
      "score --checkpoint " + tmp.str("ckpt") + " --rows " + tmp.str("rows.bin"), 20);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "model.safetensors") && has(r.out, "FIFO")) << r.out;
  // A token shard that is a FIFO.
  const TokenManifest m = make_token_dir(tmp.str("tokens"));
  fs::remove(m.path(m.shards[0]));
  ASSERT_EQ(::mkfifo(m.path(m.shards[0]).c_str(), 0600), 0);
  EXPECT_TRUE(
      has(error_of([&] { TokenShard::open(m.path(m.shards[0]), m.tokenizer_hash); }), "FIFO"));
}

TEST(InputFiles, ADirectoryWhereAFileIsExpectedIsRefused) {
  // `tokenizer encode --in DIR` printed nothing and exited 0.
  TempDir tmp("v-dir");
  const std::string fixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";
  ASSERT_EQ(run("tokenizer train --vocab-size 300 --in " + fixture +
                "/bible_kjv/valid-00000.jsonl --out " + tmp.str("tok.json"))
                .code,
            0);
  const RunResult r =
      run("tokenizer encode --tokenizer " + tmp.str("tok.json") + " --in " + tmp.str());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "it is a directory")) << r.out;
  EXPECT_TRUE(has(run("plan --config " + tmp.str()).out, "it is a directory"));
}

// ---- token manifests: cross-checked against the shards -----------------------------------------

TEST(TokenManifestChecks, CountsAndVocabMustMatchTheShardHeaders) {
  TempDir tmp("v-manifest");
  const std::string dir = tmp.str("tokens");
  const TokenManifest good = make_token_dir(dir);
  ASSERT_EQ(error_of([&] { TokenManifest::load(dir).open(good.shards[0], 0x1234); }), "");
  const json base = good.to_json();
  const std::pair<const char*, json> lies[] = {{"documents", 3}, {"tokens", 4}, {"bytes", 11}};
  for (auto& [field, value] : lies) {
    json j = base;
    j["shards"][0][field] = value;
    write_manifest(dir, j);
    const TokenManifest m = TokenManifest::load(dir);
    const std::string e = error_of([&] { m.open(m.shards[0], 0x1234); });
    EXPECT_TRUE(has(e, "manifest.json") && has(e, "a/train-00000.tok") && has(e, "header"))
        << field << ": " << e;
  }
  json j = base;
  j["vocab_size"] = 512;
  write_manifest(dir, j);
  const TokenManifest m = TokenManifest::load(dir);
  const std::string e = error_of([&] { m.open(m.shards[0], 0x1234); });
  EXPECT_TRUE(has(e, "vocab_size 512") && has(e, "vocab size 300")) << e;
}

TEST(TokenManifestChecks, DuplicateShardsAndPathsOutsideTheDirectoryAreRefused) {
  TempDir tmp("v-manifest-paths");
  const std::string dir = tmp.str("tokens");
  const json base = make_token_dir(dir).to_json();
  json j = base;
  j["shards"].push_back(base["shards"][0]);  // doubles the data
  write_manifest(dir, j);
  EXPECT_TRUE(has(error_of([&] { TokenManifest::load(dir); }), "listed twice"));
  j = base;
  j["shards"][1]["file"] = "a/./train-00000.tok";
  write_manifest(dir, j);
  EXPECT_TRUE(has(error_of([&] { TokenManifest::load(dir); }), "listed twice"));
  for (const char* path : {"../a/train-00000.tok", "a/../../x.tok", "/etc/passwd", ""}) {
    j = base;
    j["shards"][0]["file"] = path;
    write_manifest(dir, j);
    const std::string e = error_of([&] { TokenManifest::load(dir); });
    EXPECT_TRUE(has(e, "manifest.json") &&
                (has(e, "leaves the manifest's directory") || has(e, "must be relative")))
        << path << ": " << e;
  }
  j = base;
  j["shards"][0]["split"] = "test";
  write_manifest(dir, j);
  EXPECT_TRUE(has(error_of([&] { TokenManifest::load(dir); }), "split 'test'"));
}

TEST(TokenManifestChecks, EvalRefusesAManifestThatLiesAboutItsShards) {
  // A duplicate entry used to double the domain's documents; a wrong count went unnoticed.
  TempDir tmp("v-manifest-eval");
  const std::string dir = tmp.str("tokens");
  const json base = make_token_dir(dir).to_json();
  ASSERT_EQ(run("init --preset tiny --set vocab_size=300 --out " + tmp.str("ckpt")).code, 0);
  const std::string eval =
      "eval --checkpoint " + tmp.str("ckpt") + " --token-dir " + dir + " --no-audit";
  ASSERT_EQ(run(eval).code, 0);
  json j = base;
  j["shards"].push_back(base["shards"][1]);
  write_manifest(dir, j);
  RunResult r = run(eval);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "a/valid-00000.tok") && has(r.out, "listed twice")) << r.out;
  j = base;
  j["shards"][1]["documents"] = 7;
  write_manifest(dir, j);
  r = run(eval);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "listed with 7 documents") && has(r.out, "header has 2")) << r.out;
}

// ---- corpus shard checksums ---------------------------------------------------------------------

class CorpusChecksums : public ::testing::Test {
 protected:
  // One domain of the committed fixture corpus with its part of the manifest, a tokenizer.
  void SetUp() override {
    const fs::path fixture = fs::path(MARIN_SOURCE_DIR) / "data/fixture";
    fs::create_directories(root() + "/bible_kjv");
    for (const char* f : {"train-00000.jsonl", "valid-00000.jsonl"})
      fs::copy_file(fixture / "bible_kjv" / f, fs::path(root()) / "bible_kjv" / f);
    json m = json::parse(read_file((fixture / "manifest.json").string()));
    const json dom = m["domains"]["bible_kjv"];
    m["domains"] = {{"bible_kjv", dom}};
    write_file_atomic(root() + "/manifest.json", m.dump(2));
    ASSERT_EQ(run("tokenizer train --vocab-size 300 --in " + root() +
                  "/bible_kjv/valid-00000.jsonl --out " + tmp.str("tok.json"))
                  .code,
              0);
  }
  std::string root() const { return tmp.str("corpus"); }
  // Changes one letter of a shard (the edit a checksum must catch).
  void edit_one_letter(const std::string& shard) {
    std::string text = read_file(root() + "/" + shard);
    const size_t at = text.find("LORD");
    ASSERT_NE(at, std::string::npos);
    text[at] = 'l';
    write_file_atomic(root() + "/" + shard, text);
  }
  TempDir tmp{"v-corpus"};
};

TEST_F(CorpusChecksums, TokenizeVerifiesEachShardUnlessToldNotTo) {
  const std::string tok = " --tokenizer " + tmp.str("tok.json") + " --corpus " + root();
  ASSERT_EQ(run("tokenize" + tok + " --out " + tmp.str("t0")).code, 0);
  edit_one_letter("bible_kjv/train-00000.jsonl");
  RunResult r = run("tokenize" + tok + " --out " + tmp.str("t1"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "train-00000.jsonl") && has(r.out, "xxh64") &&
              has(r.out, "does not match"))
      << r.out;
  r = run("tokenize" + tok + " --out " + tmp.str("t2") + " --no-verify");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST_F(CorpusChecksums, DecontaminateVerifiesEachShardUnlessToldNotTo) {
  edit_one_letter("bible_kjv/valid-00000.jsonl");
  RunResult r = run("decontaminate --corpus " + root() + " --out " + tmp.str("d1"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(has(r.out, "valid-00000.jsonl") && has(r.out, "does not match")) << r.out;
  r = run("decontaminate --corpus " + root() + " --out " + tmp.str("d2") + " --no-verify");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST_F(CorpusChecksums, TheCorpusManifestsPathsAndEntriesAreChecked) {
  json m = json::parse(read_file(root() + "/manifest.json"));
  json& shards = m["domains"]["bible_kjv"]["shards"];
  shards.push_back(shards[0]);
  write_file_atomic(root() + "/manifest.json", m.dump());
  EXPECT_TRUE(has(error_of([&] { corpus::ShardChecksums s(root()); }), "listed twice"));
  shards.erase(shards.size() - 1);
  shards[0]["file"] = "../bible_kjv/train-00000.jsonl";
  write_file_atomic(root() + "/manifest.json", m.dump());
  EXPECT_TRUE(has(error_of([&] { corpus::ShardChecksums s(root()); }), "leaves"));
  EXPECT_EQ(error_of([&] { corpus::ShardChecksums s(root(), /*verify=*/false); }), "");
}
