// A run checkpoint's state.json as a resume reads it: its own checksum (read_state_json), then the
// fields (read_run_state: step, options, data position, lineage).
#include "fuzz_util.hpp"
#include "train/run_checkpoint.hpp"
#include "train/run_state_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fz = marin::fuzz;
  fz::refuse_or_accept([&] {
    fz::input_file("step-00000001/state.json", fz::as_text(data, size));
    const std::string dir = (fz::scratch_dir() / "step-00000001").string();
    (void)marin::read_run_state(dir);
  });
  return 0;
}
