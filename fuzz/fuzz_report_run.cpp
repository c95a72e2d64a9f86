// A run directory as `marin report` reads it (report_data): the first byte picks the file, the
// rest is its text. Even: metrics.jsonl (every line flattened into columns; only the last line
// may be partial). Odd: run.json (options, the model config it validates, lineage, world size).
// The forecast is pointed at a file that does not exist, so a run.json cannot make the target
// read a file outside its scratch directory; checkpoints are not fuzzed here (fuzz_state_json,
// fuzz_safetensors).
#include <filesystem>

#include "fuzz_util.hpp"
#include "report/report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  namespace fz = marin::fuzz;
  const bool run_json = data[0] & 1;
  const std::filesystem::path run = fz::scratch_dir() / "run";
  std::filesystem::remove(run / (run_json ? "metrics.jsonl" : "run.json"));
  fz::input_file(run_json ? "run/run.json" : "run/metrics.jsonl", fz::as_text(data + 1, size - 1));
  fz::refuse_or_accept([&] {
    marin::report::ReportOptions o;
    o.measure_peak = false;
    o.forecast = (fz::scratch_dir() / "no-forecast.json").string();
    (void)marin::report::report_data({run.string()}, o);
  });
  return 0;
}
