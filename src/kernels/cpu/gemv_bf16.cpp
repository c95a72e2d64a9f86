// One row times a bf16 matrix (kernels.hpp, gemv_bf16): the bf16 GEMM of a single row, a decoded
// token's every product. oneDNN's matmul costs ~4 µs a call however small the product (against
// ~1 µs for fp32's sgemm), and a token of cpu-small makes some 300 products, most of them small,
// so bf16 decoding ran at half fp32's speed. This loop reads each weight once, as bf16 (half
// fp32's bytes: decoding is bound by memory), widens it exactly and multiplies in fp32.
//
// Each column's sum runs over k in increasing order, one fused multiply-add a term, on every
// target and at any thread count (threads split the columns), so the result does not depend on
// the machine.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gemv_bf16.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {

namespace {
using DF = hn::ScalableTag<float>;
using V = hn::Vec<DF>;

// The floats of the lanes bf16 values at p (exact: a bf16 value is the top half of a float).
HWY_INLINE V Widen(DF df, const uint16_t* p) {
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint16_t, DF> d16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, p))));
}

float WidenOne(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// y = alpha · acc (+ beta · y): the epilogue of every column, vector or scalar, in one order.
HWY_INLINE V Finish(DF df, V acc, float alpha, float beta, const float* y) {
  const V r = hn::Mul(hn::Set(df, alpha), acc);
  return beta == 0.0f ? r : hn::MulAdd(hn::Set(df, beta), hn::LoadU(df, y), r);
}
}  // namespace

// Columns [0, N) of y = alpha · x @ W + beta · y; W row k at W + k·ldw.
void Bf16Gemv(i64 N, i64 K, float alpha, const uint16_t* x, const uint16_t* W, i64 ldw, float beta,
              float* y) {
  const DF df;
  // As many vectors of columns a pass as half the registers hold (16 on AVX-512: 256 columns,
  // 512 bytes of each weight row, read as whole cache lines one row after the other).
  constexpr i64 L = kLanes, kVecs = kAccRegs;
  i64 n = 0;
  for (; n + kVecs * L <= N; n += kVecs * L) {
    V acc[kVecs];
    for (auto& a : acc) a = hn::Zero(df);
    for (i64 k = 0; k < K; ++k) {
      const V xk = hn::Set(df, WidenOne(x[k]));
      const uint16_t* w = W + k * ldw + n;
      for (i64 j = 0; j < kVecs; ++j) acc[j] = hn::MulAdd(xk, Widen(df, w + j * L), acc[j]);
    }
    for (i64 j = 0; j < kVecs; ++j)
      hn::StoreU(Finish(df, acc[j], alpha, beta, y + n + j * L), df, y + n + j * L);
  }
  for (; n + L <= N; n += L) {  // then one vector
    V acc = hn::Zero(df);
    for (i64 k = 0; k < K; ++k)
      acc = hn::MulAdd(hn::Set(df, WidenOne(x[k])), Widen(df, W + k * ldw + n), acc);
    hn::StoreU(Finish(df, acc, alpha, beta, y + n), df, y + n);
  }
  for (; n < N; ++n) {  // the last columns one by one, with the same operations
    float acc = 0.0f;
    for (i64 k = 0; k < K; ++k) acc = std::fma(WidenOne(x[k]), WidenOne(W[k * ldw + n]), acc);
    const float r = alpha * acc;
    y[n] = beta == 0.0f ? r : std::fma(beta, y[n], r);
  }
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(Bf16Gemv);
}  // namespace cpu

void gemv_bf16(i64 N, i64 K, float alpha, const uint16_t* x, const uint16_t* W, i64 ldw, float beta,
               float* y) {
  // Large products (the LM head) split their columns over the threads: each column's sum is
  // unchanged. 256 columns a chunk, a multiple of every target's pass.
  constexpr i64 kChunk = 256;
  const auto gemv = HWY_DYNAMIC_DISPATCH(cpu::Bf16Gemv);
  const i64 chunks = (N + kChunk - 1) / kChunk;
  cpu::parallel_for(chunks, N * K >= 16 * cpu::kParallelMin, [&](i64 c) {
    const i64 n0 = c * kChunk;
    gemv(std::min(kChunk, N - n0), K, alpha, x, W + n0, ldw, beta, y + n0);
  });
}

}  // namespace marin::kernels
#endif  // HWY_ONCE
