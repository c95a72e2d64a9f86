// A checkpoint's config.json, read by load_config (parse, required fields, ranges, rules).
#include "fuzz_util.hpp"
#include "train/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  marin::fuzz::refuse_or_accept([&] {
    marin::fuzz::input_file("ckpt/config.json", marin::fuzz::as_text(data, size));
    marin::load_config((marin::fuzz::scratch_dir() / "ckpt").string()).validate();
  });
  return 0;
}
