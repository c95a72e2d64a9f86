// The safetensors reader of checkpoints (model.safetensors, optimizer.safetensors).
#include "fuzz_util.hpp"
#include "train/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  marin::fuzz::refuse_or_accept([&] {
    const marin::SafetensorsFile f =
        marin::parse_safetensors(marin::fuzz::as_text(data, size), "fuzz.safetensors");
    for (const auto& [name, t] : f.tensors) (void)f.at(name);
  });
  return 0;
}
