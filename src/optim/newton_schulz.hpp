#pragma once
// Newton–Schulz orthogonalisation for MuonH (recipe §5 step 2): five quintic iterations with
// per-iteration coefficients push every singular value of U towards 1 while keeping its singular
// vectors, approximating the polar factor U·Vᵀ of U = U·S·Vᵀ. All products go through
// marin::kernels (gemm, and syrk for the symmetric ones); nothing is allocated: the caller passes
// a workspace.
#include <cstdint>

#include "kernels/kernels.hpp"

namespace marin::optim {

using i64 = int64_t;

struct NsCoeffs {
  double a, b, c;
};
inline constexpr int kNsSteps = 5;
inline constexpr NsCoeffs kNsCoeffs[kNsSteps] = {{4.0848, -6.8946, 2.9270},
                                                 {3.9505, -6.3029, 2.6377},
                                                 {3.7418, -5.5913, 2.3037},
                                                 {2.8769, -3.1427, 1.2046},
                                                 {2.8366, -3.0525, 1.2012}};
inline constexpr double kNsNormEps = 1e-8;

// Elements of T the workspace of newton_schulz / newton_schulz_batched needs for one
// rows x cols matrix: m·n + 2·m² with m = min(rows, cols), n = max(rows, cols).
i64 ns_workspace_size(i64 rows, i64 cols);

// O = NS(U) for one row-major rows x cols matrix:
//   X = U / (‖U‖_F + 1e-8); transpose if rows > cols; 5 x { A = X·Xᵀ; B = b·A + c·A·A;
//   X ← a·X + B·X }; transpose back.
// The transposes are never materialised: for rows > cols the same iteration runs on the tall X as
// A = XᵀX, X ← a·X + X·Bᵀ, which is the transpose of the wide iteration term for term.
// O may alias U (in place). workspace: ns_workspace_size(rows, cols) elements, any contents.
// `products`: fp32 (the default: the orthogonalisation of fp32 master-weight updates), or
// compute, the run's compute dtype (--ns-dtype compute; the 535B run ran Newton–Schulz in bf16):
// its three products are then GEMMs in that dtype (bf16 inputs, fp32 accumulation), the symmetric
// two included, as a bf16 syrk does not exist.
template <class T>
void newton_schulz(const T* U, T* O, i64 rows, i64 cols, T* workspace,
                   kernels::Precision products = kernels::Precision::fp32);

// num_mats matrices stored back to back ([num_mats, rows, cols]), each orthogonalised on its own
// (routed experts of one weight kind), spread over the compute threads (kernels::parallel_tasks;
// each matrix single-threaded, so the result is the same at every thread count).
// workspace: ns_batched_workspace_size(num_mats, rows, cols) elements, one single-matrix
// workspace per task slot, sized at the thread count of the call.
i64 ns_batched_workspace_size(i64 num_mats, i64 rows, i64 cols);
template <class T>
void newton_schulz_batched(const T* U, T* O, i64 num_mats, i64 rows, i64 cols, T* workspace,
                           kernels::Precision products = kernels::Precision::fp32);

// Multiply-add count of one newton_schulz call (for GFLOP/s reports): 2 FLOPs per MAC.
double ns_flops(i64 rows, i64 cols);

}  // namespace marin::optim
