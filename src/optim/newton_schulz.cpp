// Newton–Schulz iteration on the GEMM kernels (see newton_schulz.hpp).
#include "optim/newton_schulz.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/kernels.hpp"
#include "kernels/optim.hpp"
#include "kernels/threads.hpp"

namespace marin::optim {

using kernels::gemm;

i64 ns_workspace_size(i64 rows, i64 cols) {
  const i64 m = std::min(rows, cols), n = std::max(rows, cols);
  return m * n + 2 * m * m;
}

i64 ns_batched_workspace_size(i64 num_mats, i64 rows, i64 cols) {
  return kernels::task_slots(num_mats) * ns_workspace_size(rows, cols);
}

double ns_flops(i64 rows, i64 cols) {
  const double m = static_cast<double>(std::min(rows, cols));
  const double n = static_cast<double>(std::max(rows, cols));
  // per iteration: X·Xᵀ (m·m·n), A·A (m·m·m), B·X (m·m·n) multiply-adds
  return kNsSteps * 2.0 * (2.0 * m * m * n + m * m * m);
}

template <class T>
void newton_schulz(const T* U, T* O, i64 rows, i64 cols, T* workspace,
                   kernels::Precision products) {
  const i64 total = rows * cols;
  if (total == 0) return;
  const bool tall = rows > cols;
  const i64 m = std::min(rows, cols), n = std::max(rows, cols);
  T* X0 = workspace;  // [rows, cols], ping-pong partner of O
  T* A = X0 + m * n;  // [m, m]
  T* B = A + m * m;   // [m, m]

  // The symmetric products as syrk (half a GEMM's work) unless they must follow a bf16 dtype.
  const bool fp32 = std::is_same_v<T, double> || products == kernels::Precision::fp32 ||
                    kernels::compute_dtype() == kernels::Dtype::fp32;
  const double ss = kernels::sum_squares(U, total);
  const T scale = static_cast<T>(1.0 / (std::sqrt(ss) + kNsNormEps));
  kernels::scale_to(U, scale, X0, total);

  // Five iterations alternate X0 -> O -> X0 -> O -> X0 -> O: the last lands in O.
  T* src = X0;
  T* dst = O;
  for (int it = 0; it < kNsSteps; ++it) {
    const T a = static_cast<T>(kNsCoeffs[it].a);
    const T b = static_cast<T>(kNsCoeffs[it].b);
    const T c = static_cast<T>(kNsCoeffs[it].c);
    // A = X·Xᵀ of the wide form (XᵀX of the tall one); symmetric, so a syrk (half the work).
    if (fp32 && tall)
      kernels::syrk<T>(true, m, n, T(1), src, m, T(0), A, m);
    else if (fp32)
      kernels::syrk<T>(false, m, n, T(1), src, n, T(0), A, m);
    else if (tall)
      gemm<T>(true, false, m, m, n, T(1), src, m, src, m, T(0), A, m, products);
    else
      gemm<T>(false, true, m, m, n, T(1), src, n, src, n, T(0), A, m, products);
    // B = b·A + c·A·A + a·I (A·A = A·Aᵀ: a syrk again): folding a·X into the product saves a
    // pass over X.
    kernels::scale_to(A, b, B, m * m);
    if (fp32)
      kernels::syrk<T>(false, m, m, c, A, m, T(1), B, m);
    else
      gemm<T>(false, false, m, m, m, c, A, m, A, m, T(1), B, m, products);
    kernels::add_diagonal(B, m, a);
    // X ← (B + a·I)·X in the wide form; X ← X·(B + a·I)ᵀ in the tall form.
    if (tall)
      gemm<T>(false, true, n, m, m, T(1), src, m, B, m, T(0), dst, m, products);
    else
      gemm<T>(false, false, m, n, m, T(1), B, m, src, n, T(0), dst, n, products);
    std::swap(src, dst);
  }
  // kNsSteps is odd, so the result is in O already.
  static_assert(kNsSteps % 2 == 1, "the ping-pong above assumes an odd number of iterations");
}

template <class T>
void newton_schulz_batched(const T* U, T* O, i64 num_mats, i64 rows, i64 cols, T* workspace,
                           kernels::Precision products) {
  const i64 sz = rows * cols, ws = ns_workspace_size(rows, cols);
  kernels::parallel_tasks(num_mats, [&](i64 e, int slot) {
    newton_schulz<T>(U + e * sz, O + e * sz, rows, cols, workspace + slot * ws, products);
  });
}

using kernels::Precision;
template void newton_schulz<float>(const float*, float*, i64, i64, float*, Precision);
template void newton_schulz<double>(const double*, double*, i64, i64, double*, Precision);
template void newton_schulz_batched<float>(const float*, float*, i64, i64, i64, float*, Precision);
template void newton_schulz_batched<double>(const double*, double*, i64, i64, i64, double*,
                                            Precision);

}  // namespace marin::optim
