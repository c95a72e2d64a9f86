// The CLI as users drive it: plan's exact numbers, init + score round trip, the numpy reader, and
// one clear error (non-zero exit, naming the problem) for each kind of bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "model/params.hpp"
#include "train/checkpoint.hpp"
#include "train/safetensors.hpp"

using namespace marin;
using marin::testing::metrics;
using marin::testing::run;
using marin::testing::TempDir;
using marin::testing::write_rows;

namespace {

void write_tokens(const std::string& path, const std::vector<uint32_t>& ids) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(ids.data()), std::streamsize(ids.size() * 4));
}

std::vector<uint32_t> random_rows(int rows, int S, uint32_t V) {
  std::vector<uint32_t> ids(size_t(rows) * (S + 1));
  uint64_t x = 12345;
  for (auto& v : ids) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v = uint32_t((x >> 33) % V);
  }
  return ids;
}

}  // namespace

TEST(Cli, PlanHeroJsonIsExact) {
  auto r = run("plan --preset hero-535b --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["active_params"].get<int64_t>(), 22'762'487'808);
  EXPECT_EQ(j["headline_total_params"].get<int64_t>(), 535'305'388'032);
  EXPECT_EQ(j["every_tensor_params"].get<int64_t>(), 535'477'106'688);
  EXPECT_EQ(j["forward_flops_per_token"].get<int64_t>(), 49'912'086'528);
  EXPECT_EQ(j["steps"].get<int64_t>(), 390'251);
  EXPECT_NEAR(j["training_flops"].get<double>() / 1e24, 2.696, 5e-4);
  EXPECT_NEAR(j["muonh_lr"].get<double>(), 3.29e-3, 5e-6);
  EXPECT_NEAR(j["adam_lr"].get<double>(), 7.59e-4, 5e-7);
  EXPECT_NEAR(j["eps"].get<double>(), 6.04e-15, 5e-18);
  EXPECT_DOUBLE_EQ(j["beta2"].get<double>(), 0.95);
  EXPECT_GT(j["memory_bytes"]["activations"].get<int64_t>(), 0);
}

TEST(Cli, PlanStepsAndBudgetOptions) {
  auto r = run("plan --preset cpu-small --batch 16 --steps 1000 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps"].get<int64_t>(), 1000);
  EXPECT_EQ(j["tokens_per_step"].get<int64_t>(), 16 * 512);
  r = run("plan --preset cpu-small --steps 10 --tokens-per-param 20");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("either --steps or --tokens-per-param"), std::string::npos) << r.out;
}

// plan --ranks N: what each rank of `marin train` under mpirun holds, part by part. The parts
// add up; over more ranks the optimizer shard shrinks; --shard-params shrinks the weights, the
// gradient, the exact sum's accumulator and the rollback copy, not the optimizer state or the
// activations; the rollback copy borrows the partials; what marin train would refuse is refused
// alike.
TEST(Cli, PlanMemoryPerRank) {
  const auto per_rank = [](const std::string& args) {
    auto r = run("plan --preset cpu-small --json " + args);
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out)["memory_per_rank"]["fp32"];
  };
  const auto one = per_rank("--ranks 1"), four = per_rank("--ranks 4"),
             sharded = per_rank("--ranks 4 --shard-params");
  int64_t sum = 0;
  for (const char* part : {"weights", "gradients", "partials", "accumulator", "optimizer",
                           "rollback", "weight_copy", "activations"})
    sum += four[part].get<int64_t>();
  EXPECT_EQ(sum, four["total"].get<int64_t>());
  EXPECT_LT(four["optimizer"].get<int64_t>(), one["optimizer"].get<int64_t>());
  // One rank runs 4 micro-batches: the 3 earlier ones' gradients hold the whole rollback copy.
  EXPECT_EQ(one["partials"].get<int64_t>(), 3 * one["gradients"].get<int64_t>());
  EXPECT_EQ(one["rollback"].get<int64_t>(), 0);
  for (const char* part : {"weights", "gradients", "accumulator", "rollback"})
    EXPECT_LT(sharded[part].get<int64_t>(), four[part].get<int64_t>()) << part;
  for (const char* part : {"optimizer", "activations"})
    EXPECT_EQ(sharded[part].get<int64_t>(), four[part].get<int64_t>()) << part;
  auto r = run("plan --preset cpu-small --shard-params");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("need --ranks N"), std::string::npos) << r.out;
  r = run("plan --preset cpu-small --ranks 3");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("cannot be split over 3 ranks"), std::string::npos) << r.out;
  r = run("plan --preset cpu-small --ranks 4 --ep 3");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--ep 3 must divide --ranks (4)"), std::string::npos) << r.out;
}

TEST(Cli, InitLoadsBackBitIdenticallyAndScores) {
  TempDir tmp("init");
  auto r = run("init --preset tiny --seed 1 --out " + tmp.str("ckpt"));
  ASSERT_EQ(r.code, 0) << r.out;
  // Bit-identical load against a fresh in-memory init with the same seed.
  const ModelConfig c = load_config(tmp.str("ckpt"));
  ParamTable table(c);
  Buffer<float> expect(table.total()), got(table.total());
  table.initialize(expect.data(), 1);
  load_params(tmp.str("ckpt"), table, got.data());
  EXPECT_EQ(std::memcmp(expect.data(), got.data(), expect.size() * sizeof(float)), 0);

  write_tokens(tmp.str("rows.bin"), random_rows(5, int(c.seq_len), uint32_t(c.vocab_size)));
  r = run("score --checkpoint " + tmp.str("ckpt") + " --rows " + tmp.str("rows.bin") +
          " --batch 2");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"].get<int64_t>(), 5 * c.seq_len);
  // At init the prediction is near uniform: CE ≈ ln V.
  EXPECT_NEAR(j["ce"].get<double>(), std::log(double(c.vocab_size)), 0.1);
  EXPECT_NEAR(j["loss"].get<double>(), j["ce"].get<double>() + 1e-4 * j["z"].get<double>(), 1e-9);
  // Deterministic: the same command gives the same line.
  EXPECT_EQ(
      run("score --checkpoint " + tmp.str("ckpt") + " --rows " + tmp.str("rows.bin") + " --batch 2")
          .out,
      r.out);
}

TEST(Cli, NumpyReaderReadsInitOutput) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 has no numpy (scripts/setup.sh installs python3-numpy)";
  TempDir tmp("numpy");
  ASSERT_EQ(run("init --preset tiny --seed 2 --out " + tmp.str("ckpt")).code, 0);
  const std::string cmd = "/usr/bin/python3 " MARIN_SOURCE_DIR "/scripts/read_safetensors.py " +
                          tmp.str("ckpt/model.safetensors") + " > " + tmp.str("np.txt");
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream f(tmp.str("np.txt"));
  const SafetensorsFile st = read_safetensors(tmp.str("ckpt/model.safetensors"));
  std::string line;
  size_t n = 0;
  while (std::getline(f, line)) {
    const auto tab1 = line.find('\t'), tab2 = line.rfind('\t');
    const std::string name = line.substr(0, tab1);
    const double sum = std::stod(line.substr(tab2 + 1));
    double expect = 0;
    for (float v : st.at(name).data) expect += v;
    EXPECT_NEAR(sum, expect, 1e-6 * (1 + std::abs(expect))) << name;
    ++n;
  }
  EXPECT_EQ(n, st.names.size());
}

TEST(Cli, BadConfigsAreNamed) {
  auto r = run("plan --preset tiny --set top_k=8");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("top_k + 1 (9) must not exceed num_experts (8)"), std::string::npos)
      << r.out;
  r = run("plan --preset nope");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("unknown preset 'nope'"), std::string::npos) << r.out;
  TempDir tmp("cfg");
  std::ofstream(tmp.str("bad.toml")) << "[model]\nhidden_dim = 64\nnum_heads = 7\n";
  r = run("plan --preset tiny --config " + tmp.str("bad.toml"));  // the preset fills the rest
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("kv_heads_local (2) must divide num_heads (7)"), std::string::npos) << r.out;
  std::ofstream(tmp.str("typo.toml")) << "hiden_dim = 64\n";
  r = run("plan --config " + tmp.str("typo.toml"));
  EXPECT_NE(r.out.find("unknown config field 'hiden_dim'"), std::string::npos) << r.out;
  std::ofstream(tmp.str("syntax.toml")) << "hidden_dim = = 64\n";
  r = run("plan --config " + tmp.str("syntax.toml"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("syntax.toml:1:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": TOML error: "), std::string::npos) << r.out;
}

TEST(Cli, BadCheckpointsAreNamed) {
  TempDir tmp("badckpt");
  ASSERT_EQ(run("init --preset tiny --out " + tmp.str("ok")).code, 0);
  write_tokens(tmp.str("rows.bin"), random_rows(1, 64, 512));
  const ModelConfig c = load_config(tmp.str("ok"));
  ParamTable table(c);
  Buffer<float> p(table.total());
  table.initialize(p.data(), 0);

  // A missing tensor.
  std::vector<TensorView> views;
  for (auto& t : table.params())
    if (t.name != "layers.2.attn.wq") views.push_back({t.name, t.shape, p.data() + t.offset});
  std::filesystem::create_directories(tmp.str("missing"));
  std::filesystem::copy(tmp.str("ok/config.json"), tmp.str("missing/config.json"));
  write_safetensors(tmp.str("missing/model.safetensors"), views);
  auto r = run("score --checkpoint " + tmp.str("missing") + " --rows " + tmp.str("rows.bin"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("layers.2.attn.wq"), std::string::npos) << r.out;

  // A wrong shape.
  views.clear();
  for (auto& t : table.params()) {
    auto shape = t.shape;
    if (t.name == "lm_head") shape = {shape[1], shape[0]};
    views.push_back({t.name, shape, p.data() + t.offset});
  }
  std::filesystem::create_directories(tmp.str("shape"));
  std::filesystem::copy(tmp.str("ok/config.json"), tmp.str("shape/config.json"));
  write_safetensors(tmp.str("shape/model.safetensors"), views);
  r = run("score --checkpoint " + tmp.str("shape") + " --rows " + tmp.str("rows.bin"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("lm_head"), std::string::npos) << r.out;

  // A truncated file.
  std::filesystem::create_directories(tmp.str("trunc"));
  std::filesystem::copy(tmp.str("ok/config.json"), tmp.str("trunc/config.json"));
  std::filesystem::copy(tmp.str("ok/model.safetensors"), tmp.str("trunc/model.safetensors"));
  std::filesystem::resize_file(tmp.str("trunc/model.safetensors"),
                               std::filesystem::file_size(tmp.str("ok/model.safetensors")) - 100);
  r = run("score --checkpoint " + tmp.str("trunc") + " --rows " + tmp.str("rows.bin"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("trunc/model.safetensors"), std::string::npos) << r.out;

  // Not a checkpoint directory.
  r = run("score --checkpoint " + tmp.str("nowhere") + " --rows " + tmp.str("rows.bin"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("config.json: missing"), std::string::npos) << r.out;
}

TEST(Cli, BadTokenFilesAreNamed) {
  TempDir tmp("badtok");
  ASSERT_EQ(run("init --preset tiny --out " + tmp.str("ckpt")).code, 0);
  auto ids = random_rows(2, 64, 512);
  ids[70] = 512;  // row 1, position 5: out of vocabulary
  write_tokens(tmp.str("oov.bin"), ids);
  auto r = run("score --checkpoint " + tmp.str("ckpt") + " --rows " + tmp.str("oov.bin"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("token id 512 at row 1, position 5 is not below the vocabulary size 512"),
            std::string::npos)
      << r.out;
  ids = random_rows(2, 64, 512);
  ids.pop_back();
  write_tokens(tmp.str("short.bin"), ids);
  r = run("score --checkpoint " + tmp.str("ckpt") + " --rows " + tmp.str("short.bin"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("is not a multiple of (seq_len + 1) × 4 = 260"), std::string::npos) << r.out;
}

TEST(Cli, ResumeAppliesTheOptionsItMayChangeAndRefusesTheOthersByName) {
  TempDir tmp("cli-resume-options");
  write_rows(tmp.str("rows.bin"), 16);
  const std::string run_dir = tmp.str("run");
  auto r = run("train --preset tiny --batch 4 --steps 4 --rows " + tmp.str("rows.bin") + " --out " +
               run_dir);
  ASSERT_EQ(r.code, 0) << r.out;
  // Not the run's own options: refused, every one named, nothing run.
  r = run("train --resume " + run_dir + " --seed 3 --batch 2 --steps 6");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--batch, --seed cannot change on --resume"), std::string::npos) << r.out;
  EXPECT_EQ(metrics(run_dir).size(), 4u);
  r = run("train --resume " + run_dir + " --rows " + tmp.str("rows.bin"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--rows cannot change on --resume"), std::string::npos) << r.out;
  // What it may change is applied, not dropped: a longer schedule and a checkpoint cadence.
  r = run("train --resume " + run_dir + " --steps 6 --ckpt-every 1 --eval-batches 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(metrics(run_dir).size(), 6u);
  const auto run_json = nlohmann::json::parse(marin::read_file(run_dir + "/run.json"));
  EXPECT_EQ(run_json["options"]["steps"], 6);
  EXPECT_EQ(run_json["options"]["ckpt_every"], 1);
  EXPECT_EQ(run_json["options"]["eval_batches"], 2);
  r = run("train --resume " + run_dir + " --steps 3");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--steps 3"), std::string::npos) << r.out;
}

TEST(Cli, AShortDataSourceIsNamedWithThePassesItImplies) {
  TempDir tmp("cli-short-data");
  write_rows(tmp.str("rows.bin"), 8);
  const std::string args =
      "train --preset tiny --batch 4 --steps 6 --rows " + tmp.str("rows.bin") + " --out ";
  auto r = run(args + tmp.str("warned"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("warning: " + tmp.str("rows.bin") +
                       " (8 pre-tokenized rows): the run reads 24 rows (6 steps × batch 4), 3.0 "
                       "passes over its 8 rows"),
            std::string::npos)
      << r.out;
  r = run(args + tmp.str("refused") + " --strict-data");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("3.0 passes over its 8 rows (--strict-data)"), std::string::npos) << r.out;
  r = run("train --preset tiny --batch 4 --steps 2 --rows " + tmp.str("rows.bin") + " --out " +
          tmp.str("enough"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("warning"), std::string::npos) << r.out;
}

TEST(Cli, ScoreATokenDirectoryDomainPackedAsValidationPacksIt) {
  TempDir tmp("cli-score-tokdir");
  ASSERT_EQ(marin::testing::tokenize_fixture(tmp), "");
  auto r = run("init --preset tiny --out " + tmp.str("ck"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("score --checkpoint " + tmp.str("ck") + " --token-dir " + tmp.str("tokens") +
          " --domain fortunes");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  // Every document of the split is scored: each token but a document's first is a label.
  uint64_t tokens = 0, documents = 0;
  const auto m = nlohmann::json::parse(marin::read_file(tmp.str("tokens/manifest.json")));
  for (auto& sh : m["shards"])
    if (sh["domain"] == "fortunes" && sh["split"] == "valid")
      tokens += sh["tokens"].get<uint64_t>(), documents += sh["documents"].get<uint64_t>();
  ASSERT_GT(documents, 0u);
  EXPECT_EQ(j["tokens"].get<uint64_t>(), tokens - documents);
  EXPECT_GT(j["ce"].get<double>(), 0);
  // A domain that is not there, and neither source, are named.
  r = run("score --checkpoint " + tmp.str("ck") + " --token-dir " + tmp.str("tokens") +
          " --domain nowhere");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("nowhere"), std::string::npos) << r.out;
  r = run("score --checkpoint " + tmp.str("ck"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--rows FILE or --token-dir DIR"), std::string::npos) << r.out;
  // The old spelling still works, with a warning.
  write_rows(tmp.str("rows.bin"), 3);
  r = run("score --checkpoint " + tmp.str("ck") + " --tokens " + tmp.str("rows.bin"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--tokens is deprecated; use --rows"), std::string::npos) << r.out;
}

// A clone has no shared spec folder beside it: the contract travels in docs/ (recipe, formats,
// corpus sources), and nothing in the repository sends a reader outside it.
TEST(Repository, TheContractTravelsWithTheClone) {
  namespace fs = std::filesystem;
  const fs::path root = MARIN_SOURCE_DIR;
  for (const char* doc : {"docs/recipe.md", "docs/formats.md", "docs/corpus_sources.md"})
    EXPECT_TRUE(fs::is_regular_file(root / doc)) << doc;
  EXPECT_NE(marin::read_file((root / "docs/recipe.md").string()).find("## 1. Configuration"),
            std::string::npos);
  const std::string outside = std::string("..") + "/shared";  // not itself a match below
  std::vector<fs::path> files = {root / "README.md"};
  for (const char* dir : {"docs", "src", "scripts", "tests", "bench", "fuzz", "configs"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir))
      if (e.is_regular_file() && e.file_size() < (4u << 20)) files.push_back(e.path());
  for (const fs::path& f : files)
    EXPECT_EQ(marin::read_file(f.string()).find(outside), std::string::npos)
        << f << " points outside the clone";
}
