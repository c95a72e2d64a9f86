// A pre-registered forecast.json as `train --forecast FILE` reads it (ForecastTracker), for a
// target run of 100 steps (the seeds' inputs.target.steps).
#include "fuzz_util.hpp"
#include "scaling/forecast.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fz = marin::fuzz;
  fz::refuse_or_accept([&] {
    const std::string path = fz::input_file("forecast.json", fz::as_text(data, size));
    (void)marin::scaling::ForecastTracker(path, 100);
  });
  return 0;
}
