#pragma once
// The optimizer's element-wise updates and reductions (cpu/optim.cpp, cpu/sum_squares.cpp),
// beside kernels.hpp: Adam's moments and direction, MuonH's Nesterov momentum, the pieces of the
// hyperball step and of Newton–Schulz outside its GEMMs. Single-threaded, each in one fixed order:
// the sums of squares set every hyperball radius, and a run must be bit-identical at any thread
// count.
#include "kernels/kernels.hpp"

namespace marin::kernels {

// Σ x² accumulated in double, in a fixed order whatever the ISA (cpu/sum_squares.cpp): element i
// adds to partial sum i mod kSumSquaresPartials, in index order; then the partials, in order.
inline constexpr int kSumSquaresPartials = 16;
template <class T>
double sum_squares(const T* x, i64 n);
// y += a·x
template <class T>
void axpy(T a, const T* x, T* y, i64 n);
// y = a·x
template <class T>
void scale_to(const T* x, T a, T* y, i64 n);
// A[i, i] += a on an m × m row-major matrix.
template <class T>
void add_diagonal(T* A, i64 m, T a);
// M ← β·M + G; U = β·M + G (Nesterov).
template <class T>
void nesterov_momentum(const T* G, T* M, T* U, i64 n, T beta);

// Adam with bias correction, the coefficients in double (rounded to T here):
// m ← b1·m + c1·g, v ← b2·v + c2·g², u = (m·ibc1)/(√(v·ibc2) + eps).
struct AdamCoeffs {
  double b1, b2, c1, c2, ibc1, ibc2, eps;
};
// Writes the direction u to U.
template <class T>
void adam_direction(const AdamCoeffs& k, const T* G, T* M, T* V, T* U, i64 n);
// P -= lr·(u + wd·P).
template <class T>
void adam_update(const AdamCoeffs& k, T* P, const T* G, T* M, T* V, i64 n, double lr, double wd);

}  // namespace marin::kernels
