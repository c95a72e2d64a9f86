// A model config as TOML (`--config FILE`): core/toml_file, then the field table and its rules.
#include "fuzz_util.hpp"
#include "model/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const marin::ModelConfig tiny = marin::ModelConfig::preset("tiny");
  // Odd first byte: the preset fills missing fields (`--preset tiny --config FILE`).
  const marin::ModelConfig* base = size > 0 && (data[0] & 1) ? &tiny : nullptr;
  marin::fuzz::refuse_or_accept([&] {
    const std::string path =
        marin::fuzz::input_file("config.toml", marin::fuzz::as_text(data, size));
    marin::ModelConfig::from_toml_file(path, base).validate();
  });
  return 0;
}
