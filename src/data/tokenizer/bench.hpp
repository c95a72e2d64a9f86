#pragma once
// Single-threaded encode throughput, callable from `marin bench tokenizer` and the benchmarks.
#include <cstdint>
#include <string>
#include <vector>

namespace marin {

struct TokenizerBench {
  double mb_per_s = 0;  // encoded input MB (1e6 bytes) per second, after one warm-up pass
  double seconds = 0;   // timed seconds
  uint64_t bytes = 0;   // bytes per pass
  uint64_t tokens = 0;  // tokens per pass
  uint64_t docs = 0;    // documents per pass
  int passes = 0;       // timed passes
  uint64_t vocab_hash = 0;
};

// Loads the vocabulary (`.tiktoken` or tokenizer.json), reads the documents of `files` (.jsonl:
// one "text" per line; else the whole file) and encodes them all on this thread, once to warm up
// and then repeatedly for at least `min_seconds`.
TokenizerBench bench_tokenizer_encode(const std::string& vocab_path,
                                      const std::vector<std::string>& files,
                                      double min_seconds = 1.0);

}  // namespace marin
