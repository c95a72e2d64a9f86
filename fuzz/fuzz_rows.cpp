// A pre-tokenized rows file (docs/formats.md: rows × (seq_len + 1) little-endian uint32 ids),
// loaded as `train --tokens` loads it, then read back as the trainer reads it. The first input
// byte picks seq_len (1..16), the vocabulary is 512.
#include "data/token_rows.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int64_t seq_len = 1 + data[0] % 16;
  marin::fuzz::refuse_or_accept([&] {
    const std::string path =
        marin::fuzz::input_file("rows.bin", marin::fuzz::as_text(data + 1, size - 1));
    const marin::TokenRows r = marin::TokenRows::load(path, seq_len, 512);
    std::vector<int32_t> tokens(2 * seq_len), labels(2 * seq_len);
    for (int64_t first = 0; first < r.rows; ++first) r.fill(first, 2, tokens.data(), labels.data());
  });
  return 0;
}
