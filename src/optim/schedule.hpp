#pragma once
// Learning-rate and weight-decay schedules (recipe §5).
#include <cstdint>

namespace marin::optim {

using i64 = int64_t;

// w = floor(0.01·N) warmup steps for a run of N steps.
i64 warmup_steps(i64 total_steps);

// lr(s) for 0-based step s of N:  peak·s/w for s < w;  peak·(1 − 0.95·(s − w)/(N − w)) otherwise
// (linear warmup from 0, then linear decay that would reach 5% of peak at s = N; Levanter's
// schedule). w = 0 means no warmup. Steps past N keep decaying linearly (a resumed run with a
// longer horizon should change N instead).
double lr_at(double peak, i64 step, i64 total_steps);

// Optional decoupled weight decay on the head gate and router: wd(t) = wd0·max(0, 1 − t/T).
inline constexpr double kGateRouterWd = 0.02;
double weight_decay_at(i64 step, i64 horizon, double wd0 = kGateRouterWd);

}  // namespace marin::optim
