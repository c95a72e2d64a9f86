// fp32 → bf16 conversion, bit for bit what the hardware does (Intel's vcvtneps2bf16 and
// oneDNN's reference bfloat16_t, whose pseudo-code is the same): a normal number rounds to
// nearest with ties to even (add 0x7FFF plus the lowest kept bit, truncate); ±Inf stays; a NaN
// keeps its sign and top mantissa bits with the quiet bit set; zero and denormals become a zero
// of the same sign (the conversion treats denormal inputs as zero). Compiled per Highway target;
// the tail of a row goes through a zero-padded buffer, so every element takes the vector path.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/bf16.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {

namespace {
using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using VU = hn::Vec<DU>;

// The fp32 bit pattern whose upper half is the bf16 value of x (lower half: garbage).
HWY_INLINE VU RoundBits(DU du, VU u) {
  const VU exp_mask = hn::Set(du, 0x7F800000u);
  const VU e = hn::And(u, exp_mask);
  const auto tiny = hn::Eq(e, hn::Zero(du));  // zero or denormal
  const auto special = hn::Eq(e, exp_mask);   // Inf or NaN
  const auto nan = hn::And(special, hn::Ne(hn::And(u, hn::Set(du, 0x007FFFFFu)), hn::Zero(du)));
  const VU lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  VU r = hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), lsb));            // normal: round to nearest even
  r = hn::IfThenElse(special, u, r);                                // Inf: as is
  r = hn::IfThenElse(nan, hn::Or(u, hn::Set(du, 0x00400000u)), r);  // NaN: quiet
  return hn::IfThenElse(tiny, hn::And(u, hn::Set(du, 0x80000000u)), r);
}

// n <= lanes elements through padded buffers.
template <class F>
HWY_INLINE void Tail(const float* x, i64 n, F&& body) {
  alignas(64) float buf[kLanes] = {};
  std::copy(x, x + n, buf);
  body(buf);
}
}  // namespace

void ToBf16(const float* x, uint16_t* y, i64 n) {
  const DF df;
  const DU du;
  const DI di;
  const hn::Rebind<uint16_t, DI> d16;
  const i64 lanes = i64(hn::Lanes(df));
  auto one = [&](const float* src, uint16_t* dst) {
    const VU r = hn::ShiftRight<16>(RoundBits(du, hn::BitCast(du, hn::LoadU(df, src))));
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, r)), d16, dst);
  };
  i64 i = 0;
  for (; i + lanes <= n; i += lanes) one(x + i, y + i);
  if (i < n)
    Tail(x + i, n - i, [&](float* buf) {
      alignas(64) uint16_t out[kLanes];
      one(buf, out);
      std::copy(out, out + (n - i), y + i);
    });
}

void RoundToBf16(const float* x, float* y, i64 n) {
  const DF df;
  const DU du;
  const i64 lanes = i64(hn::Lanes(df));
  auto one = [&](const float* src, float* dst) {
    const VU r =
        hn::And(RoundBits(du, hn::BitCast(du, hn::LoadU(df, src))), hn::Set(du, 0xFFFF0000u));
    hn::StoreU(hn::BitCast(df, r), df, dst);
  };
  i64 i = 0;
  for (; i + lanes <= n; i += lanes) one(x + i, y + i);
  if (i < n)
    Tail(x + i, n - i, [&](float* buf) {
      one(buf, buf);
      std::copy(buf, buf + (n - i), y + i);
    });
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(ToBf16);
HWY_EXPORT(RoundToBf16);
}  // namespace cpu

// Rows of the matrix are independent; big conversions are split over the threads by rows (or,
// for one long row, by chunks). Both conversions share the loops: `convert` is the kernel of
// the CPU's best target.
namespace {
constexpr i64 kChunk = 1 << 14;

template <class Out>
using Convert = void (*)(const float*, Out*, i64);

template <class Out>
void in_chunks(Convert<Out> convert, const float* x, Out* y, i64 n) {
  const i64 chunks = (n + kChunk - 1) / kChunk;
  cpu::parallel_for(chunks, n >= cpu::kParallelMin, [&](i64 c) {
    const i64 b = c * kChunk;
    convert(x + b, y + b, std::min(kChunk, n - b));
  });
}

template <class Out>
void by_rows(Convert<Out> convert, const float* x, i64 rows, i64 cols, i64 ld, Out* y) {
  cpu::parallel_for(rows, rows * cols >= cpu::kParallelMin,
                    [&](i64 r) { convert(x + r * ld, y + r * cols, cols); });
}
}  // namespace

void to_bf16(const float* x, uint16_t* y, i64 n) {
  in_chunks<uint16_t>(&HWY_DYNAMIC_DISPATCH(cpu::ToBf16), x, y, n);
}

void round_to_bf16(const float* x, float* y, i64 n) {
  in_chunks<float>(&HWY_DYNAMIC_DISPATCH(cpu::RoundToBf16), x, y, n);
}

void to_bf16_rows(const float* x, i64 rows, i64 cols, i64 ld, uint16_t* y) {
  by_rows<uint16_t>(&HWY_DYNAMIC_DISPATCH(cpu::ToBf16), x, rows, cols, ld, y);
}

void round_to_bf16_rows(const float* x, i64 rows, i64 cols, i64 ld, float* y) {
  by_rows<float>(&HWY_DYNAMIC_DISPATCH(cpu::RoundToBf16), x, rows, cols, ld, y);
}

void from_bf16(const uint16_t* x, float* y, i64 n) {
  cpu::for_blocks(n, [&](i64 b, i64 len) {
    for (i64 i = b; i < b + len; ++i) {
      const uint32_t u = uint32_t(x[i]) << 16;
      std::memcpy(&y[i], &u, sizeof u);
    }
  });
}

}  // namespace marin::kernels
#endif  // HWY_ONCE
