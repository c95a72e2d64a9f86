// A scaling ladder (`marin ladder --config FILE`, TOML): rungs, batch rule, family, per-rung
// fields.
#include "fuzz_util.hpp"
#include "scaling/ladder.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(marin::fuzz::as_text(data, size));
  marin::fuzz::refuse_or_accept(
      [&] { marin::scaling::LadderConfig::from_toml_text(text, "fuzz.toml"); });
  return 0;
}
