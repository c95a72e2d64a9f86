// Adam / AdamW updates (see adam.hpp).
#include "optim/adam.hpp"

#include <cmath>

#include "core/error.hpp"
#include "kernels/optim.hpp"

namespace marin::optim {

namespace {

kernels::AdamCoeffs coeffs(const AdamParams& hp, i64 step) {
  MARIN_CHECK(step >= 1, "Adam step count must start at 1, got {}", step);
  const double bc1 = 1.0 - std::pow(hp.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(hp.beta2, static_cast<double>(step));
  return {hp.beta1, hp.beta2, 1.0 - hp.beta1, 1.0 - hp.beta2, 1.0 / bc1, 1.0 / bc2, hp.eps};
}

}  // namespace

template <class T>
void adam_direction(const T* G, T* M, T* V, T* U, i64 n, const AdamParams& hp, i64 step) {
  kernels::adam_direction(coeffs(hp, step), G, M, V, U, n);
}

template <class T>
void adam_update(T* P, const T* G, T* M, T* V, i64 n, double lr, const AdamParams& hp, i64 step,
                 double wd) {
  kernels::adam_update(coeffs(hp, step), P, G, M, V, n, lr, wd);
}

template <class T>
void adamw_update(T* P, const T* G, T* M, T* V, i64 n, double lr, const AdamParams& hp, i64 step,
                  double wd) {
  adam_update<T>(P, G, M, V, n, lr, hp, step, wd);
}

#define MARIN_ADAM_INST(T)                                                                         \
  template void adam_direction<T>(const T*, T*, T*, T*, i64, const AdamParams&, i64);              \
  template void adam_update<T>(T*, const T*, T*, T*, i64, double, const AdamParams&, i64, double); \
  template void adamw_update<T>(T*, const T*, T*, T*, i64, double, const AdamParams&, i64, double);
MARIN_ADAM_INST(float)
MARIN_ADAM_INST(double)
#undef MARIN_ADAM_INST

}  // namespace marin::optim
