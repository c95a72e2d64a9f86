// Adam / AdamW updates (see adam.hpp).
#include "optim/adam.hpp"

#include <cmath>

#include "core/error.hpp"

namespace marin::optim {

namespace {

struct Coeffs {
  double b1, b2, one_m_b1, one_m_b2, inv_bc1, inv_bc2, eps;
};

Coeffs coeffs(const AdamParams& hp, i64 step) {
  MARIN_CHECK(step >= 1, "Adam step count must start at 1, got {}", step);
  const double bc1 = 1.0 - std::pow(hp.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(hp.beta2, static_cast<double>(step));
  return {hp.beta1, hp.beta2, 1.0 - hp.beta1, 1.0 - hp.beta2, 1.0 / bc1, 1.0 / bc2, hp.eps};
}

}  // namespace

template <class T>
void adam_direction(const T* G, T* M, T* V, T* U, i64 n, const AdamParams& hp, i64 step) {
  const Coeffs k = coeffs(hp, step);
  const T b1 = T(k.b1), b2 = T(k.b2), c1 = T(k.one_m_b1), c2 = T(k.one_m_b2);
  const T ibc1 = T(k.inv_bc1), ibc2 = T(k.inv_bc2), eps = T(k.eps);
  for (i64 i = 0; i < n; ++i) {
    const T g = G[i];
    const T m = b1 * M[i] + c1 * g;
    const T v = b2 * V[i] + c2 * g * g;
    M[i] = m;
    V[i] = v;
    U[i] = (m * ibc1) / (std::sqrt(v * ibc2) + eps);
  }
}

template <class T>
void adam_update(T* P, const T* G, T* M, T* V, i64 n, double lr, const AdamParams& hp, i64 step,
                 double wd) {
  const Coeffs k = coeffs(hp, step);
  const T b1 = T(k.b1), b2 = T(k.b2), c1 = T(k.one_m_b1), c2 = T(k.one_m_b2);
  const T ibc1 = T(k.inv_bc1), ibc2 = T(k.inv_bc2), eps = T(k.eps);
  const T tlr = T(lr), twd = T(wd);
  for (i64 i = 0; i < n; ++i) {
    const T g = G[i];
    const T m = b1 * M[i] + c1 * g;
    const T v = b2 * V[i] + c2 * g * g;
    M[i] = m;
    V[i] = v;
    const T u = (m * ibc1) / (std::sqrt(v * ibc2) + eps) + twd * P[i];
    P[i] -= tlr * u;
  }
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
