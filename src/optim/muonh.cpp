// MuonH / AdamH updates and the hyperball step (see muonh.hpp).
#include "optim/muonh.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "kernels/optim.hpp"
#include "optim/newton_schulz.hpp"

namespace marin::optim {

RadiusScope parse_radius_scope(std::string_view s) {
  if (s == "layer") return RadiusScope::kLayer;
  if (s == "expert") return RadiusScope::kExpert;
  fail("expert_radius must be \"layer\" or \"expert\", got \"{}\"", s);
}

std::string_view radius_scope_name(RadiusScope s) {
  return s == RadiusScope::kLayer ? "layer" : "expert";
}

namespace {

template <class T>
double norm2(const T* x, i64 n) {
  return std::sqrt(kernels::sum_squares(x, n));
}

// The hyperball step on n elements whose norm is `norm(x)`: R = ‖P‖, P' = P − η·R·O/‖O‖,
// P ← R·P'/‖P'‖ (norms floored). One copy for a single radius per matrix and per stack.
template <class T, class Norm>
void hyperball_move(T* P, const T* O, i64 n, double lr, Norm norm) {
  const double R = std::max(norm(P), kHyperballNormFloor);
  const double on = std::max(norm(O), kHyperballNormFloor);
  const T step = static_cast<T>(lr * R / on);
  kernels::axpy(T(-step), O, P, n);
  const double pn = std::max(norm(P), kHyperballNormFloor);
  const T rescale = static_cast<T>(R / pn);
  kernels::scale(P, rescale, n);
}

// The hyperball step with one radius over a stack of matrices (see muonh.hpp, StackSum).
template <class T>
void stack_hyperball_step(T* P, const T* O, i64 mats, i64 mat_size, double lr,
                          const StackSum* split) {
  std::vector<double> ss(static_cast<size_t>(mats));
  auto stack_norm = [&](const T* x) {
    for (i64 e = 0; e < mats; ++e) {
      const double n = norm2(x + e * mat_size, mat_size);
      ss[size_t(e)] = n * n;
    }
    // The per-matrix sums add in matrix order (bookkeeping over E numbers, not a kernel).
    const double total =
        split ? split->total(ss.data(), mats) : std::accumulate(ss.begin(), ss.end(), 0.0);
    return std::sqrt(total);
  };
  hyperball_move(P, O, mats * mat_size, lr, stack_norm);
}

}  // namespace

template <class T>
void hyperball_step(T* P, const T* O, i64 groups, i64 group_size, double lr) {
  auto norm = [&](const T* x) { return norm2(x, group_size); };
  for (i64 g = 0; g < groups; ++g)
    hyperball_move(P + g * group_size, O + g * group_size, group_size, lr, norm);
}

i64 muonh_workspace_size(i64 num_mats, i64 rows, i64 cols) {
  return num_mats * rows * cols + ns_batched_workspace_size(num_mats, rows, cols);
}

template <class T>
void muonh_update(T* P, const T* G, T* M, i64 num_mats, i64 rows, i64 cols, double lr,
                  RadiusScope scope, T* workspace, double beta, const StackSum* split,
                  kernels::Precision ns_products) {
  const i64 n = num_mats * rows * cols;
  T* O = workspace;
  T* ns_ws = workspace + n;
  kernels::nesterov_momentum(G, M, O, n, static_cast<T>(beta));
  newton_schulz_batched<T>(O, O, num_mats, rows, cols, ns_ws, ns_products);
  if (scope == RadiusScope::kLayer && (num_mats > 1 || split))
    stack_hyperball_step<T>(P, O, num_mats, rows * cols, lr, split);
  else if (scope == RadiusScope::kLayer)
    hyperball_step<T>(P, O, 1, n, lr);
  else
    hyperball_step<T>(P, O, num_mats, rows * cols, lr);
}

template <class T>
void adamh_update(T* P, const T* G, T* M, T* V, i64 n, double lr, const AdamParams& hp, i64 step,
                  T* workspace) {
  adam_direction<T>(G, M, V, workspace, n, hp, step);
  hyperball_step<T>(P, workspace, 1, n, lr);
}

#define MARIN_MUONH_INST(T)                                                                       \
  template void hyperball_step<T>(T*, const T*, i64, i64, double);                                \
  template void muonh_update<T>(T*, const T*, T*, i64, i64, i64, double, RadiusScope, T*, double, \
                                const StackSum*, kernels::Precision);                             \
  template void adamh_update<T>(T*, const T*, T*, T*, i64, double, const AdamParams&, i64, T*);
MARIN_MUONH_INST(float)
MARIN_MUONH_INST(double)
#undef MARIN_MUONH_INST

}  // namespace marin::optim
