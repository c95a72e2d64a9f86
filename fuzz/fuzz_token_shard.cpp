// A token shard (<domain>/<split>-NNNNN.tok: header, document offsets, tokens), opened and read
// the way the loader reads it. The seeds are made with tokenizer hash kHash.
#include "data/shards.hpp"
#include "fuzz_util.hpp"

namespace {
constexpr uint64_t kHash = 0x5eed;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  marin::fuzz::refuse_or_accept([&] {
    const std::string path = marin::fuzz::input_file("shard.tok", marin::fuzz::as_text(data, size));
    const marin::TokenShard s = marin::TokenShard::open(path, kHash);
    uint64_t sum = 0;
    for (uint64_t d = 0; d < s.documents(); ++d)
      for (uint32_t t : s.document(d)) sum += t;
    if (s.tokens() > 0) {
      std::vector<int32_t> out(s.tokens());
      s.copy(0, s.tokens(), out.data());
    }
    (void)sum;
  });
  return 0;
}
