// Pre-tokenized imports (import_token_files): the first byte picks the layout. Even: the rest is
// an llm.c .bin. Odd: the next 4 bytes (little-endian) give the length of a Megatron .idx, which
// follows, and the rest is its .bin. The tokenizer is a small one trained here, with an EOS and
// a BOS, so ids past its 262 tokens are refused and smaller ones are imported.
#include <cstring>

#include "data/sources/token_import.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "fuzz_util.hpp"

namespace {

const marin::Tokenizer& tokenizer() {
  static const marin::Tokenizer tok =
      marin::Tokenizer::train({"the cat sat on the mat", "a dog and a cat"}, 262);
  return tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  marin::fuzz::refuse_or_accept([&] {
    const std::string_view rest = marin::fuzz::as_text(data + 1, size - 1);
    marin::data::TokenImportOptions o;
    o.domain = "d";
    o.out = (marin::fuzz::scratch_dir() / "out").string();
    o.progress = false;
    o.valid_fraction = 0.5;
    o.shard_tokens = 64;
    if (data[0] % 2 == 0) {
      o.format = "llmc";
      o.inputs = {marin::fuzz::input_file("a.bin", rest)};
    } else {
      if (rest.size() < 4) return;
      uint32_t n;
      std::memcpy(&n, rest.data(), 4);
      const std::string_view files = rest.substr(4);
      n = uint32_t(std::min<size_t>(n, files.size()));
      marin::fuzz::input_file("m.idx", files.substr(0, n));
      o.format = "megatron";
      o.inputs = {marin::fuzz::input_file("m.bin", files.substr(n))};
    }
    marin::data::import_token_files(tokenizer(), o);
  });
  return 0;
}
