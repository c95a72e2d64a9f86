// A data mixture (`--data FILE`, TOML): sources, weights and phases.
#include "data/mixture.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(marin::fuzz::as_text(data, size));
  marin::fuzz::refuse_or_accept([&] { marin::MixtureConfig::from_toml_text(text, "fuzz.toml"); });
  return 0;
}
