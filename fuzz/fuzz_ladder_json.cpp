// A ladder directory's ladder.json, as `marin forecast --ladder DIR` reads it and fits it into a
// forecast (make_forecast: read_ladder_json, every rung's curve, the fit) for the tiny preset.
#include "fuzz_util.hpp"
#include "scaling/forecast.hpp"
#include "scaling/ladder.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fz = marin::fuzz;
  fz::refuse_or_accept([&] {
    fz::input_file("ladder/ladder.json", fz::as_text(data, size));
    marin::scaling::ForecastOptions o;
    o.ladder_dir = (fz::scratch_dir() / "ladder").string();
    o.target_name = "tiny";
    o.target = marin::ModelConfig::preset("tiny");
    o.target_steps = 100;
    o.target_batch = 8;
    (void)marin::scaling::make_forecast(o);
  });
  return 0;
}
