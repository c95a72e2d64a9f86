// Corpus reading throughput, one thread (docs/benchmarks.md, "Corpus readers"): decompression +
// JSONL parsing alone, and reading + tokenizing, for JSONL and JSONL.zst. Input: $MARIN_BENCH_JSONL
// (and the same file compressed by `zstd` beside it, written on first use); without it, the
// fixture corpus's documents repeated to ≥ 200 MB in /tmp. Tokenizer: $MARIN_BENCH_TOKENIZER, else
// a 4096-token BPE trained on the fixture's KJV text.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/fileio.hpp"
#include "data/shards.hpp"
#include "data/sources/document_source.hpp"
#include "data/tokenizer/documents.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;

namespace {

std::string fixture() {
  return (fs::path(MARIN_SOURCE_DIR) / "data" / "fixture").string();
}

const std::string& jsonl_path() {
  static const std::string path = [] {
    if (const char* p = std::getenv("MARIN_BENCH_JSONL")) return std::string(p);
    const std::string p = "/tmp/marin-bench-sources.jsonl";
    if (!fs::exists(p)) {
      std::string once;
      for (auto& e : fs::recursive_directory_iterator(fixture()))
        if (e.is_regular_file() && e.path().extension() == ".jsonl")
          once += marin::read_file(e.path().string());
      std::ofstream out(p + ".tmp", std::ios::binary);
      for (uint64_t n = 0; n < (200u << 20); n += once.size()) out << once;
      out.close();
      fs::rename(p + ".tmp", p);
    }
    return p;
  }();
  return path;
}

const std::string& zst_path() {
  static const std::string path = [] {
    const std::string p = jsonl_path() + ".zst";
    if (!fs::exists(p) && std::system(("zstd -q -3 -T1 -c " + jsonl_path() + " > " + p +
                                       ".tmp && mv " + p + ".tmp " + p)
                                          .c_str()) != 0)
      std::abort();
    return p;
  }();
  return path;
}

const marin::Tokenizer& tokenizer() {
  static const marin::Tokenizer tok = [] {
    if (const char* p = std::getenv("MARIN_BENCH_TOKENIZER")) return marin::Tokenizer::load(p);
    return marin::Tokenizer::train(
        marin::read_documents({fixture() + "/bible_kjv/train-00000.jsonl"}), 4096,
        marin::Tokenizer::default_specials());
  }();
  return tok;
}

void read(benchmark::State& state, const std::string& path, bool tokenize) {
  const marin::Tokenizer* tok = tokenize ? &tokenizer() : nullptr;
  uint64_t text = 0, raw = 0;
  std::vector<uint32_t> ids;
  for (auto _ : state) {
    auto src = marin::data::open_source(path, "jsonl", {});
    marin::data::Document d;
    while (src->next(d)) {
      text += d.text.size();
      if (tok) {
        ids.clear();
        marin::encode_document(*tok, d.text, ids);
      }
    }
    raw += src->bytes_read();
    benchmark::DoNotOptimize(ids.data());
  }
  // MB/s of the documents' text (what the tokenizer sees), one thread.
  state.counters["text_MB/s"] = benchmark::Counter(double(text) / 1e6, benchmark::Counter::kIsRate);
  state.counters["file_MB/s"] = benchmark::Counter(double(raw) / 1e6, benchmark::Counter::kIsRate);
}

void BM_ParseJsonl(benchmark::State& s) {
  read(s, jsonl_path(), false);
}
void BM_ParseJsonlZst(benchmark::State& s) {
  read(s, zst_path(), false);
}
void BM_TokenizeJsonl(benchmark::State& s) {
  read(s, jsonl_path(), true);
}
void BM_TokenizeJsonlZst(benchmark::State& s) {
  read(s, zst_path(), true);
}

}  // namespace

BENCHMARK(BM_ParseJsonl)->Unit(benchmark::kSecond)->Iterations(1)->Repetitions(3);
BENCHMARK(BM_ParseJsonlZst)->Unit(benchmark::kSecond)->Iterations(1)->Repetitions(3);
BENCHMARK(BM_TokenizeJsonl)->Unit(benchmark::kSecond)->Iterations(1)->Repetitions(1);
BENCHMARK(BM_TokenizeJsonlZst)->Unit(benchmark::kSecond)->Iterations(1)->Repetitions(1);
