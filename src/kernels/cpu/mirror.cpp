// The lower triangle of a square row-major matrix from its upper one: what completes a symmetric
// product (kernels::syrk: OpenBLAS writes one triangle; the full product on oneDNN is made exactly
// symmetric by it). Newton–Schulz mirrors both symmetric products of every iteration, ~8,000
// products of 128 × 128 in a cpu-small step; element by element the strided reads cost 1.5–2 % of
// the one-thread fp32 step (Zen 5). Here the float version moves 4 × 4 blocks through registers:
// four 4-float rows of the upper triangle are loaded, transposed with interleaves, and stored as
// four rows of the lower one. Copies only, so every target writes the same bits.
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/mirror.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef MARIN_KERNELS_CPU_MIRROR_ROWS  // once, though foreach_target reads this file per target
#define MARIN_KERNELS_CPU_MIRROR_ROWS
namespace marin::kernels::cpu {
// The element-wise copy, for the diagonal blocks and the rows past the last whole block.
template <class T>
inline void mirror_rows(T* C, i64 from, i64 to, i64 cols_from, i64 ldc) {
  for (i64 i = from; i < to; ++i)
    for (i64 j = cols_from; j < i; ++j) C[i * ldc + j] = C[j * ldc + i];
}
}  // namespace marin::kernels::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void MirrorUpperF32(float* C, i64 n, i64 ldc) {
#if HWY_TARGET == HWY_SCALAR
  mirror_rows(C, 0, n, 0, ldc);
#else
  const hn::Full128<float> d;
  const i64 whole = n / 4 * 4;
  for (i64 bi = 0; bi < whole; bi += 4) {
    float* out = C + bi * ldc;  // rows bi..bi+3 of the lower triangle, from columns bi..bi+3
    for (i64 bj = 0; bj < bi; bj += 4) {
      const float* in = C + bj * ldc + bi;  // rows bj..bj+3, all above the diagonal
      const auto r0 = hn::LoadU(d, in), r1 = hn::LoadU(d, in + ldc);
      const auto r2 = hn::LoadU(d, in + 2 * ldc), r3 = hn::LoadU(d, in + 3 * ldc);
      const auto t0 = hn::InterleaveLower(d, r0, r1);                  // r0[0] r1[0] r0[1] r1[1]
      const auto t1 = hn::InterleaveLower(d, r2, r3);                  // r2[0] r3[0] r2[1] r3[1]
      const auto t2 = hn::InterleaveUpper(d, r0, r1);                  // r0[2] r1[2] r0[3] r1[3]
      const auto t3 = hn::InterleaveUpper(d, r2, r3);                  // r2[2] r3[2] r2[3] r3[3]
      hn::StoreU(hn::ConcatLowerLower(d, t1, t0), d, out + bj);        // column 0 of the rows
      hn::StoreU(hn::ConcatUpperUpper(d, t1, t0), d, out + ldc + bj);  // column 1
      hn::StoreU(hn::ConcatLowerLower(d, t3, t2), d, out + 2 * ldc + bj);  // column 2
      hn::StoreU(hn::ConcatUpperUpper(d, t3, t2), d, out + 3 * ldc + bj);  // column 3
    }
    mirror_rows(C, bi + 1, bi + 4, bi, ldc);  // the diagonal block
  }
  mirror_rows(C, whole, n, 0, ldc);
#endif
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(MirrorUpperF32);
}  // namespace cpu

template <>
void mirror_upper<float>(float* C, i64 n, i64 ldc) {
  HWY_DYNAMIC_DISPATCH(cpu::MirrorUpperF32)(C, n, ldc);
}
template <>
void mirror_upper<double>(double* C, i64 n, i64 ldc) {
  cpu::mirror_rows(C, 0, n, 0, ldc);
}

}  // namespace marin::kernels
#endif  // HWY_ONCE
