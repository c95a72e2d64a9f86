// A .tiktoken vocabulary (base64 token, rank per line). A tokenizer that loads must also encode
// and decode.
#include "data/tokenizer/tokenizer.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  marin::fuzz::refuse_or_accept([&] {
    const std::string path =
        marin::fuzz::input_file("vocab.tiktoken", marin::fuzz::as_text(data, size));
    const marin::Tokenizer tok = marin::Tokenizer::from_tiktoken(path);
    const std::vector<uint32_t> ids = tok.encode("Hello, world! caf\xC3\xA9 12345");
    (void)tok.decode(ids);
  });
  return 0;
}
