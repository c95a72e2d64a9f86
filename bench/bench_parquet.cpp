// Reading a Parquet text column (src/data/sources/parquet_*.cpp), single thread, in MB/s of text
// (SetBytesProcessed counts the values' bytes): SNAPPY and ZSTD files of >= 200 MB of real text,
// the fixture corpus's documents repeated, PLAIN-encoded, 1 MiB pages. The files are written at
// start-up by scripts/parquet_write.sh (the Rust `parquet` crate through npm parquet-wasm) into
// $TMPDIR/marin-bench-parquet, never committed; without node/npm the benchmarks report an error.
#include <benchmark/benchmark.h>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "data/sources/parquet_file.hpp"
#include "data/tokenizer/documents.hpp"

namespace fs = std::filesystem;

namespace {

constexpr size_t kTextBytes = size_t(200) << 20;

// The directory of the two files, written once; "" and the reason when they could not be.
const std::pair<std::string, std::string>& bench_files() {
  static const std::pair<std::string, std::string> r = []() -> std::pair<std::string, std::string> {
    const fs::path dir = fs::temp_directory_path() / "marin-bench-parquet";
    if (fs::exists(dir / "files.txt")) return {dir.string(), ""};
    std::vector<std::string> files;
    for (auto& e : fs::recursive_directory_iterator(fs::path(MARIN_SOURCE_DIR) / "data/fixture"))
      if (e.is_regular_file() && e.path().extension() == ".jsonl") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    const std::vector<std::string> docs = marin::read_documents(files);
    std::string jsonl;
    size_t text = 0;
    while (text < kTextBytes)
      for (const auto& d : docs) {
        jsonl += nlohmann::json{{"text", d}}.dump() + "\n";
        text += d.size();
      }
    fs::create_directories(dir);
    marin::write_file_atomic((dir / "in.jsonl").string(), jsonl);
    const std::string cmd =
        fmt::format("{}/scripts/parquet_write.sh write {} {} bench >&2", MARIN_SOURCE_DIR,
                    (dir / "in.jsonl").string(), dir.string());
    if (std::system(cmd.c_str()) != 0) return {"", "scripts/parquet_write.sh failed: " + cmd};
    fs::remove(dir / "in.jsonl");
    return {dir.string(), ""};
  }();
  return r;
}

void read_text_column(benchmark::State& state, const char* name) {
  const auto& [dir, why] = bench_files();
  if (dir.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const std::string path = dir + "/" + name;
  int64_t bytes = 0, values = 0;
  for (auto _ : state) {
    const marin::data::ParquetFile f(path);
    marin::data::ParquetTextColumn c(f, "text");
    std::string_view v;
    while (c.next(v)) {
      bytes += int64_t(v.size());
      ++values;
    }
    benchmark::DoNotOptimize(bytes);
  }
  state.SetBytesProcessed(bytes);
  state.counters["file_MB"] = double(fs::file_size(path)) / 1e6;
  state.counters["docs"] = double(values) / double(state.iterations());
}

void BM_ParquetReadSnappy(benchmark::State& s) {
  read_text_column(s, "rust-snappy-v1-plain.parquet");
}
void BM_ParquetReadZstd(benchmark::State& s) {
  read_text_column(s, "rust-zstd-v1-plain.parquet");
}
BENCHMARK(BM_ParquetReadSnappy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ParquetReadZstd)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
