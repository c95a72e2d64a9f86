// Corpus reading throughput, one thread (docs/benchmarks.md, "Corpus readers"), in MB/s of the
// documents' text per core: decompression + parsing alone (BM_Parse*), and reading + tokenizing
// (BM_Tokenize*, each document as `marin tokenize` encodes it), for JSONL, JSONL.zst and Parquet
// (SNAPPY and ZSTD), every format read through the document seam (open_source); plus the bare
// Parquet text column (BM_ParquetColumn*: values handed out as views, no Document copy).
//
// Input: $MARIN_BENCH_JSONL, else the fixture corpus's lines (files in name order) repeated until
// their text is ≥ 200 MiB, in /tmp/marin-bench-sources.jsonl. Beside it, written on first use and
// never committed: FILE.zst (`zstd -3`), and FILE.parquet/ with the same documents, in the same
// order, as Parquet files of the Rust `parquet` crate (scripts/parquet_write.sh ... bench, via npm
// parquet-wasm: SNAPPY and ZSTD, PLAIN, 1 MiB pages); without node/npm the Parquet benchmarks
// report an error. Tokenizer: $MARIN_BENCH_TOKENIZER (a tokenizer.json or marin tokenizer), else
// a 4096-token BPE trained on the fixture's KJV text.
#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/fileio.hpp"
#include "data/shards.hpp"
#include "data/sources/document_source.hpp"
#include "data/sources/parquet_file.hpp"
#include "data/tokenizer/documents.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kTextBytes = uint64_t(200) << 20;

std::string fixture() {
  return (fs::path(MARIN_SOURCE_DIR) / "data" / "fixture").string();
}

const std::string& jsonl_path() {
  static const std::string path = [] {
    if (const char* p = std::getenv("MARIN_BENCH_JSONL")) return std::string(p);
    const std::string p = "/tmp/marin-bench-sources.jsonl";
    if (!fs::exists(p)) {
      std::vector<std::string> files;
      for (auto& e : fs::recursive_directory_iterator(fixture()))
        if (e.is_regular_file() && e.path().extension() == ".jsonl") files.push_back(e.path());
      std::sort(files.begin(), files.end());
      std::string once;
      for (const auto& f : files) once += marin::read_file(f);
      uint64_t text_once = 0;
      for (const auto& d : marin::read_documents(files)) text_once += d.size();
      std::ofstream out(p + ".tmp", std::ios::binary);
      for (uint64_t text = 0; text < kTextBytes; text += text_once) out << once;
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

// The directory of the Parquet files of jsonl_path()'s documents, written once; "" and the
// reason when they could not be.
const std::pair<std::string, std::string>& parquet_dir() {
  static const std::pair<std::string, std::string> r = []() -> std::pair<std::string, std::string> {
    const std::string dir = jsonl_path() + ".parquet";
    if (fs::exists(dir + "/files.txt")) return {dir, ""};
    const std::string cmd = fmt::format("{}/scripts/parquet_write.sh write {} {} bench >&2",
                                        MARIN_SOURCE_DIR, jsonl_path(), dir);
    if (std::system(cmd.c_str()) != 0) return {"", "scripts/parquet_write.sh failed: " + cmd};
    return {dir, ""};
  }();
  return r;
}

// The Parquet file of `codec` ("snappy", "zstd"), or "" after SkipWithError.
std::string parquet_path(benchmark::State& state, const char* codec) {
  const auto& [dir, why] = parquet_dir();
  if (dir.empty()) {
    state.SkipWithError(why.c_str());
    return "";
  }
  return fmt::format("{}/rust-{}-v1-plain.parquet", dir, codec);
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

// Reads every document of `path` as `format` through the document seam, tokenizing each when
// `tokenize`.
void read(benchmark::State& state, const std::string& path, const char* format, bool tokenize) {
  if (path.empty()) return;
  const marin::Tokenizer* tok = tokenize ? &tokenizer() : nullptr;
  uint64_t text = 0, raw = 0;
  std::vector<uint32_t> ids;
  for (auto _ : state) {
    auto src = marin::data::open_source(path, format, {});
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
  read(s, jsonl_path(), "jsonl", false);
}
void BM_ParseJsonlZst(benchmark::State& s) {
  read(s, zst_path(), "jsonl", false);
}
void BM_ParseParquet(benchmark::State& s, const char* codec) {
  read(s, parquet_path(s, codec), "parquet", false);
}
void BM_TokenizeJsonl(benchmark::State& s) {
  read(s, jsonl_path(), "jsonl", true);
}
void BM_TokenizeJsonlZst(benchmark::State& s) {
  read(s, zst_path(), "jsonl", true);
}
void BM_TokenizeParquet(benchmark::State& s, const char* codec) {
  read(s, parquet_path(s, codec), "parquet", true);
}

// The text column alone (src/data/sources/parquet_*.cpp): decompression, page and level decoding,
// the values handed out as views (no copy into a Document).
void BM_ParquetColumn(benchmark::State& state, const char* codec) {
  const std::string path = parquet_path(state, codec);
  if (path.empty()) return;
  uint64_t bytes = 0, values = 0;
  for (auto _ : state) {
    const marin::data::ParquetFile f(path);
    marin::data::ParquetTextColumn c(f, "text");
    std::string_view v;
    while (c.next(v)) {
      bytes += v.size();
      ++values;
    }
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["text_MB/s"] =
      benchmark::Counter(double(bytes) / 1e6, benchmark::Counter::kIsRate);
  state.counters["file_MB"] = double(fs::file_size(path)) / 1e6;
  state.counters["docs"] = double(values) / double(state.iterations());
}

}  // namespace

// One pass over ≥ 200 MB per iteration; repetitions from --benchmark_repetitions.
BENCHMARK(BM_ParseJsonl)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_ParseJsonlZst)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_ParseParquet, Snappy, "snappy")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_ParseParquet, Zstd, "zstd")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_TokenizeJsonl)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK(BM_TokenizeJsonlZst)->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_TokenizeParquet, Snappy, "snappy")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_TokenizeParquet, Zstd, "zstd")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_ParquetColumn, Snappy, "snappy")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_ParquetColumn, Zstd, "zstd")->Unit(benchmark::kSecond)->Iterations(1);
