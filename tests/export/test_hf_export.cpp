// marin export --format hf / marin import, proved by round trips (docs/export.md):
//  - the exported modeling_marin.py (Debian's torch, no transformers) reproduces marin.cpp's
//    logits: float64 on both sides within 1e-9, float32 within 1e-3, for `tiny` (with packed
//    documents) and `cpu-small`, every special tensor moved off its init and a non-zero QB bias;
//  - decoding through its KV cache equals its full forward;
//  - export → import → export is byte-identical (fp32, bf16, sharded), and no expert is lost;
//  - the exported tokenizer.json encodes like marin's under Hugging Face's own tokenizers.js
//    (npm @huggingface/tokenizers; skipped with a message when node/npm are absent).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/fileio.hpp"
#include "core/rng.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "export/hf_export.hpp"
#include "model/model.hpp"
#include "train/checkpoint.hpp"
#include "train/safetensors.hpp"

using namespace marin;
using namespace marin::testing;
namespace fs = std::filesystem;

namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kScript = std::string(MARIN_SOURCE_DIR) + "/tests/support/hf_logits.py";

bool have_torch() {
  return run_shell(kPython + " -c 'import torch, numpy'").code == 0;
}

struct Tokens {
  int B = 0, S = 0;
  std::vector<int32_t> ids, seg;
};

Tokens fixture_tokens(const ModelConfig& c, int B, bool packed) {
  Tokens t;
  t.B = B;
  t.S = int(c.seq_len);
  const std::string rows = fs::temp_directory_path() / fmt::format("hf-rows-{}", ::getpid());
  write_rows(rows, B, t.S, uint32_t(c.vocab_size), 5);
  const std::string bytes = read_file(rows);
  fs::remove(rows);
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < t.S; ++s) {
      uint32_t v;
      std::memcpy(&v, bytes.data() + 4 * (size_t(b) * (t.S + 1) + s), 4);
      t.ids.push_back(int32_t(v));
      // Row 0 packs three documents, the others one.
      t.seg.push_back(packed && b == 0 ? (s < t.S / 3 ? 0 : (s < 3 * t.S / 4 ? 1 : 2)) : 0);
    }
  return t;
}

// marin.cpp's logits for the checkpoint, computed in T and returned as double [B·S·V].
template <class T>
std::vector<double> marin_logits(const std::string& ck, const Tokens& t, bool packed) {
  const ModelConfig c = load_config(ck);
  Model<T> m(c, t.B);
  std::vector<float> p(size_t(m.table().total()));
  load_params(ck, m.table(), p.data());
  std::copy(p.begin(), p.end(), m.params().data());
  std::vector<int32_t> labels(t.ids.size(), 0);
  Batch b;
  b.B = t.B;
  b.tokens = t.ids.data();
  b.labels = labels.data();
  b.seg = packed ? t.seg.data() : nullptr;
  m.forward(b);
  const size_t n = size_t(t.B) * t.S * c.vocab_size;
  return std::vector<double>(m.logits(), m.logits() + n);
}

void write_i32(const std::string& path, const std::vector<int32_t>& v) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));
}

// modeling_marin.py's logits for the export (dtype float64 or float32).
std::vector<double> torch_logits(const TempDir& dir, const std::string& hf, const Tokens& t,
                                 const std::string& dtype, bool packed) {
  write_i32(dir.str("ids.i32"), t.ids);
  write_i32(dir.str("seg.i32"), t.seg);
  const RunResult r = run_shell(
      fmt::format("PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1 {} {} logits {} {} {} {} {} {} {}",
                  kPython, kScript, hf, dtype, dir.str("ids.i32"), t.B, t.S,
                  packed ? dir.str("seg.i32") : "-", dir.str("logits.f64")));
  EXPECT_EQ(r.code, 0) << r.out;
  const std::string bytes = r.code == 0 ? read_file(dir.str("logits.f64")) : std::string();
  std::vector<double> out(bytes.size() / 8);
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double x : a) m = std::max(m, std::abs(x));
  return m;
}

void export_ok(const std::string& args) {
  const RunResult r = run("export " + args);
  ASSERT_EQ(r.code, 0) << r.out;
}

// Every file of two directories, byte for byte.
void expect_same_dirs(const std::string& a, const std::string& b) {
  std::map<std::string, std::string> fa, fb;
  for (auto& e : fs::directory_iterator(a)) fa[e.path().filename()] = read_file(e.path());
  for (auto& e : fs::directory_iterator(b)) fb[e.path().filename()] = read_file(e.path());
  ASSERT_EQ(fa.size(), fb.size()) << a << " vs " << b;
  for (auto& [name, bytes] : fa) {
    ASSERT_TRUE(fb.count(name)) << name << " missing from " << b;
    EXPECT_TRUE(bytes == fb[name]) << name << " differs between " << a << " and " << b;
  }
}

// The round trip of logits for checkpoint `ck`: float64 and float32 on both sides.
void check_logits(const TempDir& dir, const std::string& ck, const std::string& what, int B,
                  bool packed) {
  const ModelConfig c = load_config(ck);
  export_ok("--checkpoint " + ck + " --out " + dir.str("hf"));
  const Tokens t = fixture_tokens(c, B, packed);

  const auto m64 = marin_logits<double>(ck, t, packed);
  const auto t64 = torch_logits(dir, dir.str("hf"), t, "float64", packed);
  const double d64 = max_abs_diff(m64, t64);
  const auto m32 = marin_logits<float>(ck, t, packed);
  const auto t32 = torch_logits(dir, dir.str("hf"), t, "float32", packed);
  const double d32 = max_abs_diff(m32, t32);
  std::printf(
      "%s (B=%d, S=%d, %s): max |logit| %.3f; max |marin − torch| float64 %.3e, "
      "float32 %.3e\n",
      what.c_str(), B, t.S, packed ? "packed documents" : "one document per row", max_abs(m64), d64,
      d32);
  EXPECT_GT(max_abs(m64), 0.1);  // logits that carry information
  EXPECT_LE(d64, 1e-9);
  EXPECT_LE(d32, 1e-3);
}

// A checkpoint of `preset` with every tensor off its init, exported and compared.
void check_preset(const std::string& preset, int B, bool packed) {
  if (!have_torch())
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  TempDir dir("hf-" + preset);
  marin::testing::write_moved_checkpoint(dir.str("ck"), preset, 3);
  check_logits(dir, dir.str("ck"), preset + " (every tensor perturbed)", B, packed);
}

}  // namespace

TEST(HfExport, TinyLogitsMatchPyTorch) {
  check_preset("tiny", 2, false);
}

TEST(HfExport, TinyPackedDocumentsMatchPyTorch) {
  check_preset("tiny", 2, true);
}

TEST(HfExport, CpuSmallLogitsMatchPyTorch) {
  check_preset("cpu-small", 1, false);
}

// A checkpoint of a real (short) training run: its directory also holds the optimizer and run
// state, and its QB bias comes from training.
TEST(HfExport, TrainedTinyCheckpointMatchesPyTorch) {
  if (!have_torch())
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  TempDir dir("hf-trained");
  write_rows(dir.str("rows.bin"), 24);
  const RunResult r = run("train --preset tiny --rows " + dir.str("rows.bin") +
                          " --batch 4 --steps 6 --ckpt-every 6 --out " + dir.str("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  check_logits(dir, dir.str("run/checkpoints/step-00000006"), "tiny after 6 training steps", 2,
               false);
}

TEST(HfExport, KvCacheDecodingEqualsFullForward) {
  if (!have_torch())
    GTEST_SKIP() << "/usr/bin/python3 has no torch (apt-get install python3-torch)";
  TempDir dir("hf-cache");
  const ModelConfig c = marin::testing::write_moved_checkpoint(dir.str("ck"), "tiny", 4);
  export_ok("--checkpoint " + dir.str("ck") + " --out " + dir.str("hf"));
  // Longer than the sliding window (32): local layers' caches are trimmed to their window.
  const Tokens t = fixture_tokens(c, 2, false);
  write_i32(dir.str("ids.i32"), t.ids);
  const RunResult r =
      run_shell(fmt::format("PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1 {} {} cache {} {} {} {}",
                            kPython, kScript, dir.str("hf"), dir.str("ids.i32"), t.B, t.S));
  ASSERT_EQ(r.code, 0) << r.out;
  std::printf("%s", r.out.c_str());
  const size_t at = r.out.find("cache_max_diff ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_LE(std::stod(r.out.substr(at + 15)), 1e-9) << r.out;
  // generate(): the 4 prompt ids then 6 new ones.
  const size_t g = r.out.find("generated ");
  ASSERT_NE(g, std::string::npos);
  std::istringstream ids(r.out.substr(g + 10));
  int n = 0;
  for (int x; ids >> x; ++n) EXPECT_TRUE(x >= 0 && x < c.vocab_size);
  EXPECT_EQ(n, 10);
}

TEST(HfExport, ExportImportExportIsByteIdentical) {
  TempDir dir("hf-roundtrip");
  const ModelConfig c = marin::testing::write_moved_checkpoint(dir.str("ck"), "tiny", 5);
  const std::string ck = dir.str("ck");
  for (const std::string dtype : {"fp32", "bf16"}) {
    const std::string a = dir.str("a-" + dtype), b = dir.str("b-" + dtype);
    export_ok("--checkpoint " + ck + " --dtype " + dtype + " --out " + a);
    const RunResult r = run("import --format hf " + a + " --out " + dir.str("ck-" + dtype));
    ASSERT_EQ(r.code, 0) << r.out;
    export_ok("--checkpoint " + dir.str("ck-" + dtype) + " --dtype " + dtype + " --out " + b);
    expect_same_dirs(a, b);
    const SafetensorsFile f = read_safetensors(a + "/model.safetensors");
    EXPECT_EQ(f.metadata.at("format"), "pt");
    EXPECT_EQ(f.tensors.begin()->second.dtype, dtype == "fp32" ? "F32" : "BF16");
  }
  // fp32 import is exact: the imported weights are the original file's.
  const SafetensorsFile orig = read_safetensors(ck + "/model.safetensors");
  const SafetensorsFile back = read_safetensors(dir.str("ck-fp32") + "/model.safetensors");
  ASSERT_EQ(orig.names, back.names);
  for (auto& n : orig.names) EXPECT_EQ(orig.at(n).data, back.at(n).data) << n;
  // bf16 import: every weight is the original rounded to bf16 (within one bf16 ulp, 2^-8 rel).
  const SafetensorsFile bf = read_safetensors(dir.str("ck-bf16") + "/model.safetensors");
  for (auto& n : orig.names) {
    const auto &x = orig.at(n).data, &y = bf.at(n).data;
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_LE(std::abs(x[i] - y[i]), std::abs(x[i]) * (1.0 / 256)) << n << "[" << i << "]";
  }
}

TEST(HfExport, ShardedExportKeepsEveryExpert) {
  TempDir dir("hf-shards");
  const ModelConfig c = marin::testing::write_moved_checkpoint(dir.str("ck"), "tiny", 6);
  export_ok("--checkpoint " + dir.str("ck") + " --out " + dir.str("one"));
  export_ok("--checkpoint " + dir.str("ck") + " --max-shard-bytes 100000 --out " + dir.str("a"));
  const nlohmann::json idx =
      nlohmann::json::parse(read_file(dir.str("a/model.safetensors.index.json")));
  std::set<std::string> files;
  for (auto& [name, file] : idx["weight_map"].items()) files.insert(file.get<std::string>());
  EXPECT_GT(files.size(), 3u) << "a 1.2 MB model in shards of 100 kB";
  // Every tensor of every layer is somewhere, once, and every routed-expert stack has E experts.
  std::map<std::string, int> per_layer_hf, per_layer_marin;
  int64_t total = 0, experts = 0;
  for (const std::string& f : files) {
    const SafetensorsFile s = read_safetensors(dir.str("a/" + f));
    EXPECT_EQ(s.metadata.at("format"), "pt");
    for (auto& n : s.names) {
      EXPECT_EQ(idx["weight_map"][n], f) << n;
      total += s.at(n).numel();
      if (n.rfind("model.layers.", 0) == 0) per_layer_hf[n.substr(13, n.find('.', 13) - 13)]++;
      if (n.find(".moe.experts.") != std::string::npos) {
        EXPECT_EQ(s.at(n).shape[0], c.num_experts) << n;
        experts += s.at(n).shape[0];
      }
    }
  }
  const ParamTable table(c);
  int64_t params = 0;
  for (auto& p : table.params()) params += p.size;
  for (auto& p : table.params())
    if (p.name.rfind("layers.", 0) == 0)
      per_layer_marin[p.name.substr(7, p.name.find('.', 7) - 7)]++;
  EXPECT_EQ(per_layer_hf, per_layer_marin);
  EXPECT_EQ(total, params);
  EXPECT_EQ(experts, 3 * c.num_layers * c.num_experts);
  EXPECT_EQ(idx["metadata"]["total_size"].get<int64_t>(), 4 * params);
  // Sharded → import → sharded is byte-identical, and the import equals the unsharded one's.
  RunResult r = run("import --format hf " + dir.str("a") + " --out " + dir.str("ck2"));
  ASSERT_EQ(r.code, 0) << r.out;
  export_ok("--checkpoint " + dir.str("ck2") + " --max-shard-bytes 100000 --out " + dir.str("b"));
  expect_same_dirs(dir.str("a"), dir.str("b"));
  r = run("import --format hf " + dir.str("one") + " --out " + dir.str("ck1"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(read_file(dir.str("ck1/model.safetensors")),
            read_file(dir.str("ck2/model.safetensors")));
  // And PyTorch reads the shards to the same logits as the single file.
  if (have_torch()) {
    const Tokens t = fixture_tokens(c, 1, false);
    EXPECT_EQ(torch_logits(dir, dir.str("a"), t, "float64", false),
              torch_logits(dir, dir.str("one"), t, "float64", false));
  }
}

TEST(HfExport, ImportRefusesALostExpertOrForeignFile) {
  TempDir dir("hf-bad");
  marin::testing::write_moved_checkpoint(dir.str("ck"), "tiny", 7);
  export_ok("--checkpoint " + dir.str("ck") + " --out " + dir.str("hf"));
  // Drop one layer's expert stack by rewriting the file without it.
  const SafetensorsFile f = read_safetensors(dir.str("hf/model.safetensors"));
  std::vector<TensorView> keep;
  for (auto& n : f.names)
    if (n != "model.layers.2.moe.experts.up_proj")
      keep.push_back({n, f.at(n).shape, f.at(n).data.data()});
  write_safetensors(dir.str("hf/model.safetensors"), keep, {{"format", "pt"}});
  RunResult r = run("import --format hf " + dir.str("hf") + " --out " + dir.str("x"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("no tensor 'model.layers.2.moe.experts.up_proj'"), std::string::npos)
      << r.out;
  // A marin checkpoint is not an export (its metadata says marin.cpp, its config no model_type).
  r = run("import --format hf " + dir.str("ck") + " --out " + dir.str("y"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("model_type"), std::string::npos) << r.out;
  // A non-empty --out is refused, naming it.
  r = run("export --checkpoint " + dir.str("ck") + " --out " + dir.str("hf"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("is not an empty directory"), std::string::npos) << r.out;
}

TEST(HfExport, TokenizerEncodesLikeMarinUnderHuggingFaceTokenizersJs) {
  TempDir dir("hf-tok");
  const std::string fixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";
  RunResult r = run("tokenizer train --vocab-size 512 --in " + fixture +
                    "/bible_kjv/train-00000.jsonl --out " + dir.str("tok.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  marin::testing::write_moved_checkpoint(dir.str("ck"), "tiny", 8);
  export_ok("--checkpoint " + dir.str("ck") + " --tokenizer " + dir.str("tok.json") + " --out " +
            dir.str("hf"));
  const Tokenizer tok = Tokenizer::from_json(dir.str("tok.json"));
  // config.json and tokenizer_config.json name the tokenizer's special ids and strings.
  const auto cfg = nlohmann::json::parse(read_file(dir.str("hf/config.json")));
  EXPECT_EQ(cfg["bos_token_id"], *tok.bos());
  EXPECT_EQ(cfg["eos_token_id"], *tok.eos());
  const auto tc = nlohmann::json::parse(read_file(dir.str("hf/tokenizer_config.json")));
  EXPECT_EQ(tc["eos_token"], std::string(tok.token_bytes(*tok.eos())));
  const Tokenizer exported = Tokenizer::from_json(dir.str("hf/tokenizer.json"));
  EXPECT_EQ(exported.hash(), tok.hash());

  // Hugging Face's tokenizers.js on the exported files.
  const RunResult fetch =
      run_shell(std::string(MARIN_SOURCE_DIR) + "/scripts/hf_tokenizer.sh fetch");
  if (fetch.code != 0)
    GTEST_SKIP() << "tokenizer not checked against Hugging Face's tokenizers.js: " << fetch.out;
  std::vector<std::string> docs;
  for (const std::string f : {"/bible_kjv/valid-00000.jsonl", "/bible_web_modern/valid-00000.jsonl",
                              "/code_python/valid-00000.jsonl"}) {
    std::ifstream in(fixture + f);
    std::string line;
    for (int i = 0; i < 40 && std::getline(in, line); ++i)
      docs.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
  }
  docs.push_back(
      "Tabs\tand  double  spaces,\r\nCRLF, digits 1234567, unicode: naïve café ☃ 日本語.");
  docs.push_back("special tokens <|end_of_text|> split out, as in HF");
  {
    std::ofstream out(dir.str("docs.jsonl"));
    for (auto& d : docs) out << nlohmann::json{{"text", d}}.dump() << "\n";
  }
  r = run_shell(std::string(MARIN_SOURCE_DIR) + "/scripts/hf_tokenizer.sh encode " + dir.str("hf") +
                " " + dir.str("docs.jsonl") + " " + dir.str("ids.jsonl"));
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream in(dir.str("ids.jsonl"));
  std::string line;
  size_t n = 0, tokens = 0;
  for (; std::getline(in, line); ++n) {
    ASSERT_LT(n, docs.size());
    const auto want = tok.encode(docs[n], /*allow_special=*/true);  // HF always splits them
    const auto got = nlohmann::json::parse(line)["ids"].get<std::vector<uint32_t>>();
    EXPECT_EQ(got, want) << "document " << n << ": " << docs[n].substr(0, 80);
    tokens += want.size();
  }
  EXPECT_EQ(n, docs.size());
  std::printf("tokenizers.js encodes %zu documents (%zu tokens) exactly like marin\n", n, tokens);
}
