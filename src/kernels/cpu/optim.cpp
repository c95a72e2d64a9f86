// The optimizer's element-wise kernels (see kernels/optim.hpp; the sum of squares is SIMD in
// cpu/sum_squares.cpp). Each is a plain loop over one block, which the compiler vectorises (its
// pointers passed by value: inside a lambda that captures them GCC leaves the loop scalar), run
// over the compute threads by for_blocks. Elements are independent, so the split changes no bit,
// and on two threads the update of a whole model's state no longer leaves one thread waiting.
#include "kernels/optim.hpp"

#include <cmath>

#include "kernels/cpu/simd.hpp"

namespace marin::kernels {
namespace block {

template <class T>
void axpy(T a, const T* x, T* y, i64 n) {
  for (i64 i = 0; i < n; ++i) y[i] += a * x[i];
}

template <class T>
void scale_to(const T* x, T a, T* y, i64 n) {
  for (i64 i = 0; i < n; ++i) y[i] = x[i] * a;
}

template <class T>
void nesterov_momentum(const T* G, T* M, T* U, i64 n, T beta) {
  for (i64 i = 0; i < n; ++i) {
    const T m = beta * M[i] + G[i];
    M[i] = m;
    U[i] = beta * m + G[i];
  }
}

template <class T>
void adam_direction(const AdamCoeffs& k, const T* G, T* M, T* V, T* U, i64 n) {
  const T b1 = T(k.b1), b2 = T(k.b2), c1 = T(k.c1), c2 = T(k.c2);
  const T ibc1 = T(k.ibc1), ibc2 = T(k.ibc2), eps = T(k.eps);
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
void adam_update(const AdamCoeffs& k, T* P, const T* G, T* M, T* V, i64 n, double lr, double wd) {
  const T b1 = T(k.b1), b2 = T(k.b2), c1 = T(k.c1), c2 = T(k.c2);
  const T ibc1 = T(k.ibc1), ibc2 = T(k.ibc2), eps = T(k.eps);
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

}  // namespace block

template <class T>
void add_diagonal(T* A, i64 m, T a) {
  for (i64 i = 0; i < m; ++i) A[i * m + i] += a;
}

template <class T>
void axpy(T a, const T* x, T* y, i64 n) {
  cpu::for_blocks(n, [&](i64 b, i64 len) { block::axpy(a, x + b, y + b, len); });
}

template <class T>
void scale_to(const T* x, T a, T* y, i64 n) {
  cpu::for_blocks(n, [&](i64 b, i64 len) { block::scale_to(x + b, a, y + b, len); });
}

template <class T>
void nesterov_momentum(const T* G, T* M, T* U, i64 n, T beta) {
  cpu::for_blocks(
      n, [&](i64 b, i64 len) { block::nesterov_momentum(G + b, M + b, U + b, len, beta); });
}

template <class T>
void adam_direction(const AdamCoeffs& k, const T* G, T* M, T* V, T* U, i64 n) {
  cpu::for_blocks(
      n, [&](i64 b, i64 len) { block::adam_direction(k, G + b, M + b, V + b, U + b, len); });
}

template <class T>
void adam_update(const AdamCoeffs& k, T* P, const T* G, T* M, T* V, i64 n, double lr, double wd) {
  cpu::for_blocks(
      n, [&](i64 b, i64 len) { block::adam_update(k, P + b, G + b, M + b, V + b, len, lr, wd); });
}

#define MARIN_OPTIM_KERNELS(T)                                                   \
  template void axpy<T>(T, const T*, T*, i64);                                   \
  template void scale_to<T>(const T*, T, T*, i64);                               \
  template void add_diagonal<T>(T*, i64, T);                                     \
  template void nesterov_momentum<T>(const T*, T*, T*, i64, T);                  \
  template void adam_direction<T>(const AdamCoeffs&, const T*, T*, T*, T*, i64); \
  template void adam_update<T>(const AdamCoeffs&, T*, const T*, T*, T*, i64, double, double);
MARIN_OPTIM_KERNELS(float)
MARIN_OPTIM_KERNELS(double)
#undef MARIN_OPTIM_KERNELS

}  // namespace marin::kernels
