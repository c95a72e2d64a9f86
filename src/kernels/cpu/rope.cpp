// Half-RoPE on interleaved pairs, in place. Angles come from a per-call table computed in double
// (position p times theta^(-2i/rope_dim)), so float and double see the same rotation.
//
// Plain loops that the compiler vectorises, compiled once per Highway target
// (hwy/foreach_target.h) so the float path runs with the machine's widest vectors, chosen at
// start-up; double runs the baseline target's copy, the exact generic path.
#include <cmath>
#include <vector>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/rope.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {
namespace {

template <class T>
void rope_t(T* x, int B, int S, int nheads, int hd, i64 row_stride, int rope_dim, double theta,
            bool inverse, i64 pos0) {
  const int half = rope_dim / 2;
  if (half <= 0) return;
  // The table only depends on (pos0, S, rope_dim, theta): keep the last one per calling thread.
  thread_local int last_S = -1, last_dim = -1;
  thread_local i64 last_pos0 = -1;
  thread_local double last_theta = 0;
  thread_local std::vector<T> table;  // [S][half] cos, then [S][half] sin
  if (table.size() < size_t(2) * S * half) table.resize(size_t(2) * S * half), last_S = -1;
  T* cs = table.data();
  T* sn = cs + size_t(S) * half;
  if (S != last_S || pos0 != last_pos0 || rope_dim != last_dim || theta != last_theta) {
    for (int i = 0; i < half; ++i) {
      const double inv_freq = std::pow(theta, -2.0 * i / rope_dim);
      for (int p = 0; p < S; ++p) {
        const double phi = double(pos0 + p) * inv_freq;
        cs[size_t(p) * half + i] = T(std::cos(phi));
        sn[size_t(p) * half + i] = T(std::sin(phi));
      }
    }
    last_S = S, last_pos0 = pos0, last_dim = rope_dim, last_theta = theta;
  }
  const T sign = inverse ? T(-1) : T(1);
  const i64 rows = i64(B) * S;
  cpu::parallel_for(rows, rows * nheads * rope_dim >= cpu::kParallelMin, [&](i64 bt) {
    const int p = int(bt % S);
    const T* c = cs + size_t(p) * half;
    const T* s = sn + size_t(p) * half;
    for (int h = 0; h < nheads; ++h) {
      T* xh = x + bt * row_stride + i64(h) * hd;
#pragma omp simd
      for (int i = 0; i < half; ++i) {
        const T x0 = xh[2 * i], x1 = xh[2 * i + 1], si = sign * s[i];
        xh[2 * i] = x0 * c[i] - x1 * si;
        xh[2 * i + 1] = x1 * c[i] + x0 * si;
      }
    }
  });
}

}  // namespace

void RopeF32(float* x, int B, int S, int nheads, int hd, i64 row_stride, int rope_dim, double theta,
             bool inverse, i64 pos0) {
  rope_t(x, B, S, nheads, hd, row_stride, rope_dim, theta, inverse, pos0);
}
void RopeF64(double* x, int B, int S, int nheads, int hd, i64 row_stride, int rope_dim,
             double theta, bool inverse, i64 pos0) {
  rope_t(x, B, S, nheads, hd, row_stride, rope_dim, theta, inverse, pos0);
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(RopeF32);
}  // namespace cpu

template <>
void rope<float>(float* x, int B, int S, int nheads, int hd, i64 row_stride, int rope_dim,
                 double theta, bool inverse, i64 pos0) {
  HWY_DYNAMIC_DISPATCH(cpu::RopeF32)
  (x, B, S, nheads, hd, row_stride, rope_dim, theta, inverse, pos0);
}
template <>
void rope<double>(double* x, int B, int S, int nheads, int hd, i64 row_stride, int rope_dim,
                  double theta, bool inverse, i64 pos0) {
  cpu::HWY_STATIC_DISPATCH(RopeF64)(x, B, S, nheads, hd, row_stride, rope_dim, theta, inverse,
                                    pos0);
}

}  // namespace marin::kernels
#endif  // HWY_ONCE
