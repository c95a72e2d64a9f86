// Learning-rate and weight-decay schedules (see schedule.hpp).
#include "optim/schedule.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace marin::optim {

i64 warmup_steps(i64 total_steps) {
  MARIN_CHECK(total_steps >= 1, "the schedule needs at least one step, got {}", total_steps);
  return total_steps / 100;  // floor(0.01·N) for N >= 0, exact in integers
}

double lr_at(double peak, i64 step, i64 total_steps) {
  const i64 w = warmup_steps(total_steps);
  if (step < w) return peak * static_cast<double>(step) / static_cast<double>(w);
  const double frac = static_cast<double>(step - w) / static_cast<double>(total_steps - w);
  return peak * (1.0 - 0.95 * frac);
}

double weight_decay_at(i64 step, i64 horizon, double wd0) {
  MARIN_CHECK(horizon >= 1, "the weight-decay horizon must be at least one step, got {}", horizon);
  return wd0 * std::max(0.0, 1.0 - static_cast<double>(step) / static_cast<double>(horizon));
}

}  // namespace marin::optim
