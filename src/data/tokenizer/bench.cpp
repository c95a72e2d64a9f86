#include "data/tokenizer/bench.hpp"

#include <chrono>

#include "core/error.hpp"
#include "data/tokenizer/documents.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace marin {

TokenizerBench bench_tokenizer_encode(const std::string& vocab_path,
                                      const std::vector<std::string>& files, double min_seconds) {
  Tokenizer tok = Tokenizer::load(vocab_path);
  std::vector<std::string> docs = read_documents(files);
  TokenizerBench r;
  r.vocab_hash = tok.hash();
  r.docs = docs.size();
  for (const auto& d : docs) r.bytes += d.size();
  if (r.bytes == 0) fail("tokenizer bench: the input files hold no text");
  std::vector<uint32_t> ids;
  auto pass = [&] {
    uint64_t n = 0;
    for (const auto& d : docs) {
      ids.clear();
      tok.encode_into(d, ids);
      n += ids.size();
    }
    return n;
  };
  r.tokens = pass();  // warm-up (fills the piece cache, as a long-running encoder would)
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  do {
    pass();
    ++r.passes;
    r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  } while (r.seconds < min_seconds);
  r.mb_per_s = double(r.bytes) * r.passes / 1e6 / r.seconds;
  return r;
}

}  // namespace marin
