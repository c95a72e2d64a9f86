// An HF tokenizer.json (ours or imported): vocabulary, merges, specials, pre-tokenizer pattern.
// A tokenizer that loads must also encode and decode.
#include "data/tokenizer/tokenizer.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(marin::fuzz::as_text(data, size));
  marin::fuzz::refuse_or_accept([&] {
    const marin::Tokenizer tok = marin::Tokenizer::from_json_text(text, "fuzz.json");
    const std::vector<uint32_t> ids = tok.encode("Hello, world! caf\xC3\xA9 12345");
    (void)tok.decode(ids);
  });
  return 0;
}
