// bf16 compute (issue 12 item 4): the fp32 → bf16 conversion is bit-exact against a scalar
// reference of the hardware's rule on every SIMD target (ties, NaN, Inf, denormals, tails);
// the emulated bf16 GEMM is the fp32 GEMM of the rounded inputs, and the real one (oneDNN, where
// the CPU has avx512_bf16) agrees with it; --dtype resolves and falls back as documented; and a
// short run of `tiny` in bf16 emulation ends within 2 % of the fp32 run's loss.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "isa_loop.hpp"
#include "kernels/kernels.hpp"
#include "kernels/threads.hpp"

namespace mk = marin::kernels;
using marin::testing::for_each_isa;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The conversion as Intel's pseudo-code for VCVTNEPS2BF16 (and oneDNN's scalar bfloat16_t)
// states it, by classification rather than by the kernel's bit tricks.
uint16_t ref_bf16(float x) {
  const uint32_t u = bits(x);
  switch (std::fpclassify(x)) {
    case FP_ZERO:
    case FP_SUBNORMAL:
      return uint16_t((u >> 16) & 0x8000);  // a zero of the same sign
    case FP_INFINITE:
      return uint16_t(u >> 16);
    case FP_NAN:
      return uint16_t((u >> 16) | 0x40);  // quiet
    default: {
      const uint32_t bias = 0x7FFF + ((u >> 16) & 1);
      return uint16_t((u + bias) >> 16);
    }
  }
}

// Special values, every boundary of the rounding and random bit patterns of every class.
std::vector<float> test_values() {
  std::vector<uint32_t> u = {
      0x00000000, 0x80000000,              // ±0
      0x00000001, 0x807FFFFF, 0x00400000,  // denormals
      0x00800000, 0x80800000,              // smallest normals
      0x3F800000, 0x3F808000, 0x3F818000,  // 1, ties to even (down, up)
      0x3F808001, 0x3F807FFF, 0xBF818000,  // just above / below a tie, a negative tie
      0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000,  // ±FLT_MAX (round to ±Inf), a tie to Inf
      0x7F7F7FFF,                          // just below that tie: stays finite
      0x7F800000, 0xFF800000,              // ±Inf
      0x7F800001, 0x7FC00000, 0xFFFFFFFF,  // NaNs (signalling, quiet, all ones)
      0x7F80FFFF, 0xFF810000,              // NaN whose payload sits below / in the kept bits
  };
  marin::Rng rng(11);
  for (int i = 0; i < 20000; ++i) u.push_back(uint32_t(rng.next_u64()));
  for (int i = 0; i < 2000; ++i) u.push_back(uint32_t(rng.next_u64()) & 0x807FFFFF);  // denormal
  for (int i = 0; i < 2000; ++i)  // exact ties: the low 16 bits 0x8000
    u.push_back((uint32_t(rng.next_u64()) & 0xFFFF0000) | 0x8000);
  std::vector<float> v;
  for (uint32_t x : u) v.push_back(from_bits(x));
  return v;
}

}  // namespace

TEST(Bf16Rounding, ReferenceOnKnownValues) {
  // The reference itself, on values whose bf16 is known by hand.
  EXPECT_EQ(ref_bf16(1.0f), 0x3F80);
  EXPECT_EQ(ref_bf16(from_bits(0x3F808000)), 0x3F80);  // tie, even below
  EXPECT_EQ(ref_bf16(from_bits(0x3F818000)), 0x3F82);  // tie, even above
  EXPECT_EQ(ref_bf16(from_bits(0x3F808001)), 0x3F81);
  EXPECT_EQ(ref_bf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(ref_bf16(from_bits(0x80000001)), 0x8000);
  EXPECT_EQ(ref_bf16(from_bits(0x7F800001)), 0x7FC0);
  EXPECT_EQ(ref_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
}

TEST(Bf16Rounding, BitExactAgainstTheReferenceOnEveryIsa) {
  const std::vector<float> v = test_values();
  const int64_t n = int64_t(v.size());
  for_each_isa([&] {
    std::vector<uint16_t> h(v.size());
    std::vector<float> r(v.size());
    mk::to_bf16(v.data(), h.data(), n);
    mk::round_to_bf16(v.data(), r.data(), n);
    int bad = 0;
    for (int64_t i = 0; i < n && bad < 10; ++i) {
      const uint16_t want = ref_bf16(v[size_t(i)]);
      if (h[size_t(i)] != want || bits(r[size_t(i)]) != uint32_t(want) << 16) {
        ++bad;
        ADD_FAILURE() << std::hex << "input 0x" << bits(v[size_t(i)]) << ": to_bf16 0x"
                      << h[size_t(i)] << ", round_to_bf16 0x" << bits(r[size_t(i)])
                      << ", reference 0x" << want;
      }
    }
    // Every length through the vector body and the tail, at every offset.
    for (int64_t len = 0; len <= 40; ++len)
      for (int64_t off : {0, 1, 3}) {
        std::vector<uint16_t> hh(size_t(len) + 2, 0xABCD);
        mk::to_bf16(v.data() + off, hh.data(), len);
        for (int64_t i = 0; i < len; ++i)
          ASSERT_EQ(hh[size_t(i)], ref_bf16(v[size_t(off + i)])) << "len " << len;
        EXPECT_EQ(hh[size_t(len)], 0xABCD) << "wrote past the end, len " << len;
        std::vector<float> rr(v.begin() + off, v.begin() + off + len);  // in place
        mk::round_to_bf16(rr.data(), rr.data(), len);
        for (int64_t i = 0; i < len; ++i)
          ASSERT_EQ(bits(rr[size_t(i)]), uint32_t(ref_bf16(v[size_t(off + i)])) << 16);
      }
  });
}

TEST(Bf16Rounding, RowsWithALeadingDimensionAndTheWayBack) {
  const std::vector<float> v = test_values();
  const int64_t rows = 37, cols = 29, ld = 41;
  ASSERT_GE(int64_t(v.size()), rows * ld);
  std::vector<uint16_t> h(size_t(rows * cols));
  std::vector<float> r(size_t(rows * cols)), back(size_t(rows * cols));
  mk::to_bf16_rows(v.data(), rows, cols, ld, h.data());
  mk::round_to_bf16_rows(v.data(), rows, cols, ld, r.data());
  mk::from_bf16(h.data(), back.data(), rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const size_t k = size_t(i * cols + j);
      const uint16_t want = ref_bf16(v[size_t(i * ld + j)]);
      ASSERT_EQ(h[k], want) << i << "," << j;
      ASSERT_EQ(bits(r[k]), uint32_t(want) << 16);
      ASSERT_EQ(bits(back[k]), uint32_t(want) << 16);  // bf16 → fp32 is exact
    }
}

namespace {

struct GemmCase {
  bool ta, tb;
  int64_t M, N, K;
  float alpha, beta;
};
const GemmCase kCases[] = {
    {false, false, 33, 47, 65, 1.0f, 0.0f}, {true, false, 20, 31, 18, 1.0f, 1.0f},
    {false, true, 17, 9, 130, -0.5f, 1.0f}, {true, true, 8, 40, 24, 2.0f, 0.0f},
    {false, false, 1, 50, 70, 1.0f, 1.0f},  // one row: the gemv path
};

std::vector<float> randn(int64_t n, uint64_t seed) {
  marin::Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = float(rng.normal());
  return v;
}

// C = gemm(A, B) in `d`, starting from the same C0 (beta ≠ 0 reads it).
std::vector<float> run_gemm(mk::Dtype d, const GemmCase& g, const std::vector<float>& A,
                            const float* B, const std::vector<float>& C0,
                            mk::Precision p = mk::Precision::compute) {
  mk::set_compute_dtype(d);
  std::vector<float> C = C0;
  mk::gemm<float>(g.ta, g.tb, g.M, g.N, g.K, g.alpha, A.data(), g.ta ? g.M : g.K, B,
                  g.tb ? g.K : g.N, g.beta, C.data(), g.N, p);
  mk::set_compute_dtype(mk::Dtype::fp32);
  return C;
}
std::vector<float> run_gemm(mk::Dtype d, const GemmCase& g, const std::vector<float>& A,
                            const std::vector<float>& B, const std::vector<float>& C0,
                            mk::Precision p = mk::Precision::compute) {
  return run_gemm(d, g, A, B.data(), C0, p);
}

// v with every value rounded to bf16 (the inputs the emulated product multiplies).
std::vector<float> rounded(std::vector<float> v) {
  mk::round_to_bf16(v.data(), v.data(), int64_t(v.size()));
  return v;
}

// got and want multiply the same bf16 inputs (products exact in fp32) and sum in another order:
// they differ by a few fp32 ulps of Σ|a·b| over the depth K.
void expect_sums_of_the_same_products(const std::vector<float>& got, const std::vector<float>& want,
                                      int64_t K) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::fabs(want[i])) * double(K)) << i;
}

}  // namespace

TEST(Bf16Gemm, EmulationIsTheFp32GemmOfTheRoundedInputs) {
  for (const GemmCase& g : kCases) {
    SCOPED_TRACE(::testing::Message() << g.ta << g.tb << " " << g.M << "x" << g.N << "x" << g.K);
    const auto A = randn(g.M * g.K, 1), B = randn(g.K * g.N, 2), C0 = randn(g.M * g.N, 3);
    const auto Ar = rounded(A), Br = rounded(B);
    const auto emu = run_gemm(mk::Dtype::bf16_emulated, g, A, B, C0);
    const auto want = run_gemm(mk::Dtype::fp32, g, Ar, Br, C0);
    const auto fp32 = run_gemm(mk::Dtype::fp32, g, A, B, C0);
    EXPECT_EQ(emu, want);
    // The rounding is real: bf16 keeps 8 bits, so the product moves by ~2^-9 relative.
    EXPECT_NE(emu, fp32);
    double err = 0, ref = 0;
    for (size_t i = 0; i < emu.size(); ++i)
      err = std::max(err, double(std::fabs(emu[i] - fp32[i]))),
      ref = std::max(ref, double(std::fabs(fp32[i])));
    EXPECT_LT(err, 0.02 * ref);
    // A Precision::fp32 GEMM ignores the compute dtype (router logits).
    EXPECT_EQ(run_gemm(mk::Dtype::bf16_emulated, g, A, B, C0, mk::Precision::fp32), fp32);
  }
}

TEST(Bf16Gemm, HardwareMatchesEmulation) {
  std::string why;
  if (!mk::bf16_gemm_supported(&why))
    GTEST_SKIP() << "the real bf16 GEMM needs avx512_bf16 (oneDNN): " << why;
  for (const GemmCase& g : kCases) {
    SCOPED_TRACE(::testing::Message() << g.ta << g.tb << " " << g.M << "x" << g.N << "x" << g.K);
    const auto A = randn(g.M * g.K, 4), B = randn(g.K * g.N, 5), C0 = randn(g.M * g.N, 6);
    const auto hw = run_gemm(mk::Dtype::bf16, g, A, B, C0);
    const auto emu = run_gemm(mk::Dtype::bf16_emulated, g, A, B, C0);
    ASSERT_NO_FATAL_FAILURE(expect_sums_of_the_same_products(hw, emu, g.K));
  }
}

// A product whose output is small beside its depth (a weight gradient) runs as slices of C's rows
// on two threads (gemm.cpp, row_slices): every row computed, both transposes of A, alpha and beta
// kept, the same bits at every call. (oneDNN blocks a slice's sums otherwise than the whole
// product's, so the bits differ from one thread's in the last places, as its fp32 sgemm's do.)
TEST(Bf16Gemm, AWeightGradientSlicedOverTheThreadsIsTheProduct) {
  std::string why;
  if (!mk::bf16_gemm_supported(&why))
    GTEST_SKIP() << "the real bf16 GEMM needs avx512_bf16 (oneDNN): " << why;
  const int before = mk::compute_threads();
  const bool chosen = mk::compute_threads_chosen();
  for (const GemmCase& g : {GemmCase{true, false, 96, 32, 512, 1.0f, 0.0f},
                            GemmCase{false, false, 72, 48, 400, -0.5f, 1.0f},
                            GemmCase{true, true, 33, 20, 300, 2.0f, 1.0f}}) {
    SCOPED_TRACE(::testing::Message() << g.ta << g.tb << " " << g.M << "x" << g.N << "x" << g.K);
    const auto A = randn(g.M * g.K, 11), B = randn(g.K * g.N, 12), C0 = randn(g.M * g.N, 13);
    mk::set_compute_threads(1, true);
    const auto one = run_gemm(mk::Dtype::bf16, g, A, B, C0);
    mk::set_compute_threads(2, true);
    const auto two = run_gemm(mk::Dtype::bf16, g, A, B, C0);
    EXPECT_EQ(run_gemm(mk::Dtype::bf16, g, A, B, C0), two);
    const auto emu = run_gemm(mk::Dtype::bf16_emulated, g, A, B, C0);
    ASSERT_NO_FATAL_FAILURE(expect_sums_of_the_same_products(one, emu, g.K));
    ASSERT_NO_FATAL_FAILURE(expect_sums_of_the_same_products(two, emu, g.K));
  }
  mk::set_compute_threads(before, chosen);
}

// An input converted for a bf16 product larger than kernels::kConversionLimitBytes (the LM head's
// logit gradient) is converted and multiplied a slice of C at a time: the product is unchanged
// but for the order of its sums, and the calling thread's conversion scratch stays within the
// limit. Both inputs large, each transposed and not, real bf16 where the CPU has it and the
// emulation (4 bytes a value) everywhere.
TEST(Bf16Gemm, AnInputLargerThanTheConversionLimitIsConvertedASliceAtATime) {
  const int64_t big = 1100, deep = 2048, small = 24;  // big × deep: 4.5 MB in bf16
  static_assert(2 * big * deep > mk::kConversionLimitBytes);
  std::vector<mk::Dtype> dtypes{mk::Dtype::bf16_emulated};
  if (mk::bf16_gemm_supported()) dtypes.push_back(mk::Dtype::bf16);
  for (const GemmCase& g : {GemmCase{false, false, big, small, deep, 1.0f, 0.0f},
                            GemmCase{true, false, big, small, deep, -0.5f, 1.0f},
                            GemmCase{false, false, small, big, deep, 1.0f, 1.0f},
                            GemmCase{false, true, small, big, deep, 2.0f, 0.0f}}) {
    SCOPED_TRACE(::testing::Message() << g.ta << g.tb << " " << g.M << "x" << g.N << "x" << g.K);
    const auto A = randn(g.M * g.K, 16), B = randn(g.K * g.N, 17), C0 = randn(g.M * g.N, 18);
    const auto Ar = rounded(A), Br = rounded(B);
    const auto want = run_gemm(mk::Dtype::fp32, g, Ar, Br, C0);
    for (const mk::Dtype d : dtypes) {
      SCOPED_TRACE(mk::dtype_name(d));
      std::vector<float> C;
      size_t scratch = 0;
      std::thread([&] {  // a thread of its own: its scratch starts empty
        C = run_gemm(d, g, A, B, C0);
        scratch = mk::conversion_scratch_bytes();
      })
          .join();
      EXPECT_GT(scratch, 0u);
      // The large input's slice and the whole small one (without slices: 4.5 or 9 MB)
      EXPECT_LE(scratch, size_t(mk::kConversionLimitBytes + 4 * small * deep));
      ASSERT_NO_FATAL_FAILURE(expect_sums_of_the_same_products(C, want, g.K));
    }
  }
}

// gemm.cpp keeps one oneDNN primitive per shape and thread (each thread its own table), whatever
// the thread count it was made at, and a kernels::parallel_tasks task (an OpenMP region, where
// oneDNN runs one thread) may reuse one made at two threads outside it (the optimizer's tasks
// beside the model's products). oneDNN 2.6 then still writes all of C, with the one-thread bits:
// what this cache relies on.
TEST(Bf16Gemm, AProductMadeAtTwoThreadsIsWholeInsideATask) {
  std::string why;
  if (!mk::bf16_gemm_supported(&why))
    GTEST_SKIP() << "the real bf16 GEMM needs avx512_bf16 (oneDNN): " << why;
  const int before = mk::compute_threads();
  const bool chosen = mk::compute_threads_chosen();
  const int64_t M = 264, N = 240, K = 136;  // a shape no other test makes first
  const auto A = randn(M * K, 14), B = randn(K * N, 15);
  // In the compute dtype set outside: the tasks run at once, and one's scope ending (back to fp32)
  // inside another's product would run that product in fp32.
  auto product = [&] {
    std::vector<float> C(size_t(M * N), 7.0f);
    mk::gemm<float>(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N);
    return C;
  };
  std::vector<float> two, emu;
  std::vector<std::vector<float>> in_task(2);
  {
    const mk::DtypeScope dtype(mk::Dtype::bf16);
    mk::set_compute_threads(2, true);
    two = product();  // made here, at two threads, on this thread
    mk::parallel_tasks(2, [&](int64_t t, int) { in_task[size_t(t)] = product(); });
    mk::set_compute_threads(before, chosen);
  }
  {
    const mk::DtypeScope dtype(mk::Dtype::bf16_emulated);
    emu = product();
  }
  const std::vector<const std::vector<float>*> results = {&two, &in_task[0], &in_task[1]};
  for (const std::vector<float>* c : results)
    ASSERT_NO_FATAL_FAILURE(expect_sums_of_the_same_products(*c, emu, K));
  EXPECT_EQ(in_task[0], in_task[1]);
}

// A product whose two inputs are one matrix (Newton–Schulz's X·Xᵀ and A·A in the compute
// dtype) converts it once for both: the bits of the same product with B a separate copy of A.
TEST(Bf16Gemm, OneMatrixAsBothInputsComputesTheBitsOfTwoCopies) {
  std::vector<mk::Dtype> dtypes = {mk::Dtype::bf16_emulated};
  if (mk::bf16_gemm_supported()) dtypes.push_back(mk::Dtype::bf16);
  const int64_t m = 24, n = 40;
  const auto X = randn(m * n, 7), S = randn(m * m, 8), C0 = randn(m * m, 9);
  for (mk::Dtype d : dtypes) {
    SCOPED_TRACE(mk::dtype_name(d));
    const GemmCase xxt{false, true, m, m, n, 0.5f, 1.0f}, aa{false, false, m, m, m, 1.0f, 0.0f};
    const std::vector<float> Xcopy = X, Scopy = S;
    EXPECT_EQ(run_gemm(d, xxt, X, X, C0), run_gemm(d, xxt, X, Xcopy, C0));
    EXPECT_EQ(run_gemm(d, aa, S, S, C0), run_gemm(d, aa, S, Scopy, C0));
    // The tall form's XᵀX: both inputs read X transposed.
    const GemmCase xtx{true, false, n, n, m, 1.0f, 0.0f};
    const auto C1 = randn(n * n, 10);
    EXPECT_EQ(run_gemm(d, xtx, X, X, C1), run_gemm(d, xtx, X, Xcopy, C1));
  }
}

// One row times a bf16 matrix (the bf16 GEMM of a decoded token): against the double sum of the
// same bf16 products, and the same bits on every target and at every thread count, as its
// fixed order (each column over k in turn) promises; beta = 0 never reads y.
TEST(Bf16Gemv, MatchesTheExactSumWithTheSameBitsOnEveryIsaAndThreadCount) {
  struct Case {
    int64_t N, K, ldw;
    float alpha, beta;
  };
  const Case cases[] = {{1, 1, 1, 1.0f, 0.0f},      {7, 33, 9, 1.0f, 1.0f},
                        {16, 256, 16, -0.5f, 1.0f}, {100, 70, 130, 2.0f, 0.0f},
                        {300, 64, 300, 1.0f, 0.5f}, {8192, 256, 8192, 1.0f, 0.0f},
                        {600, 128, 640, 1.0f, 0.0f}};
  const int threads_before = mk::compute_threads();
  const bool chosen_before = mk::compute_threads_chosen();
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.N << "x" << c.K << " ldw " << c.ldw);
    std::vector<uint16_t> x(size_t(c.K)), W(size_t(c.K * c.ldw));
    const auto xf = randn(c.K, 21), wf = randn(c.K * c.ldw, 22), y0 = randn(c.N, 23);
    mk::to_bf16(xf.data(), x.data(), c.K);
    mk::to_bf16(wf.data(), W.data(), c.K * c.ldw);
    std::vector<float> xb(x.size()), wb(W.size());
    mk::from_bf16(x.data(), xb.data(), c.K);
    mk::from_bf16(W.data(), wb.data(), c.K * c.ldw);
    std::vector<float> first;
    for_each_isa([&] {
      for (int threads : {1, 2}) {
        mk::set_compute_threads(threads, true);
        std::vector<float> y = y0;
        if (c.beta == 0.0f) std::fill(y.begin(), y.end(), std::nanf(""));  // never read
        mk::gemv_bf16(c.N, c.K, c.alpha, x.data(), W.data(), c.ldw, c.beta, y.data());
        for (int64_t n = 0; n < c.N; ++n) {
          double want = 0, mag = 0;
          for (int64_t k = 0; k < c.K; ++k) {
            want += double(xb[size_t(k)]) * double(wb[size_t(k * c.ldw + n)]);
            mag += std::fabs(double(xb[size_t(k)]) * double(wb[size_t(k * c.ldw + n)]));
          }
          want = c.alpha * want + (c.beta == 0.0f ? 0.0 : c.beta * double(y0[size_t(n)]));
          ASSERT_NEAR(y[size_t(n)], want, 1e-6 * (mag + 1.0) * double(c.K)) << n;
        }
        if (first.empty()) first = y;
        EXPECT_EQ(y, first) << threads << " thread(s)";
      }
    });
  }
  mk::set_compute_threads(threads_before, chosen_before);
}

// The dtypes in which a GEMM converts its inputs: the emulation everywhere, bf16 where it runs.
std::vector<mk::Dtype> bf16_dtypes() {
  std::vector<mk::Dtype> d = {mk::Dtype::bf16_emulated};
  if (mk::bf16_gemm_supported()) d.push_back(mk::Dtype::bf16);
  return d;
}

// A GEMM whose weight input lies inside a refreshed WeightCopy reads the copy: the same bits
// as converting at the call, and, once the weights change without a refresh, still the old
// ones (so the copy is what was read). An input that only partly lies inside, a copy of another
// dtype, or a refresh in fp32 means no copy: converted at the call, as before. The one-row
// product (gemv) reads the plain bf16 copy, which refresh_for_decoding makes (a decoder's);
// after a plain refresh() it converts at the call (WeightCopy.ARefreshWithoutThePlainCopy...).
TEST(WeightCopy, GemmsReadItAndComputeTheBitsOfConvertingAtTheCall) {
  auto refresh_in = [](mk::Dtype dtype, mk::WeightCopy& c, const GemmCase& g) {
    mk::set_compute_dtype(dtype);
    if (g.M == 1)
      c.refresh_for_decoding();
    else
      c.refresh();
    mk::set_compute_dtype(mk::Dtype::fp32);
  };
  for (const mk::Dtype d : bf16_dtypes()) {
    SCOPED_TRACE(mk::dtype_name(d));
    for (const GemmCase& g : kCases) {
      SCOPED_TRACE(::testing::Message() << g.ta << g.tb << " " << g.M << "x" << g.N << "x" << g.K);
      const auto A = randn(g.M * g.K, 7), C0 = randn(g.M * g.N, 9);
      // The weights (B) sit at an offset inside a larger buffer, as a tensor of a model's.
      const int64_t nb = g.K * g.N, at = 13;
      std::vector<float> buffer = randn(nb + 2 * at, 8);
      const std::vector<float> B(buffer.begin() + at, buffer.begin() + at + nb);
      std::vector<float> B2 = B;
      for (float& x : B2) x *= -3.0f;  // "an optimizer step"
      auto set_weights = [&](const std::vector<float>& w) {
        std::copy(w.begin(), w.end(), buffer.begin() + at);
      };
      auto run_in_buffer = [&] { return run_gemm(d, g, A, buffer.data() + at, C0); };
      const auto want = run_gemm(d, g, A, B, C0), changed = run_gemm(d, g, A, B2, C0);
      ASSERT_NE(changed, want);

      mk::WeightCopy copy(buffer.data(), int64_t(buffer.size()));
      EXPECT_EQ(run_in_buffer(), want) << "before any refresh: no copy";
      refresh_in(d, copy, g);
      EXPECT_EQ(run_in_buffer(), want) << "the copy's bits differ from converting at the call";
      set_weights(B2);
      EXPECT_EQ(run_in_buffer(), want) << "the GEMM did not read the copy";
      refresh_in(d, copy, g);
      EXPECT_EQ(run_in_buffer(), changed) << "refresh() did not convert the new weights";
      // A refresh in fp32 leaves no copy: the GEMM converts the buffer's values of the moment.
      copy.refresh();
      set_weights(B);
      EXPECT_EQ(run_in_buffer(), want) << "a refresh in fp32 left a copy in use";
      {  // A copy of a buffer that holds only part of the input is not read.
        mk::WeightCopy part(buffer.data(), at + nb - 1);
        refresh_in(d, part, g);
        set_weights(B2);
        EXPECT_EQ(run_in_buffer(), changed) << "an input only partly inside a copy read it";
      }
      // Nor is a copy of the other bf16 dtype.
      const mk::Dtype other = d == mk::Dtype::bf16 ? mk::Dtype::bf16_emulated : mk::Dtype::bf16;
      if (other == mk::Dtype::bf16 && !mk::bf16_gemm_supported()) continue;
      refresh_in(other, copy, g);
      set_weights(B);
      EXPECT_EQ(run_in_buffer(), want) << "a copy in " << mk::dtype_name(other) << " was read";
    }
  }
}

// refresh(begin, end) (fully sharded parameters convert each unit when it is gathered) converts
// that range only: a GEMM on a weight inside it reads the new values (its blocked layout from
// before is not reused), one on a weight outside still reads the copy of the last refresh.
TEST(WeightCopy, ARangeRefreshConvertsThatRangeOnly) {
  for (const mk::Dtype d : bf16_dtypes()) {
    SCOPED_TRACE(mk::dtype_name(d));
    for (const GemmCase& g : kCases) {
      SCOPED_TRACE(::testing::Message() << g.ta << g.tb << " " << g.M << "x" << g.N << "x" << g.K);
      const auto A = randn(g.M * g.K, 31), C0 = randn(g.M * g.N, 32);
      const int64_t nb = g.K * g.N, first = 5, second = first + nb + 11;
      std::vector<float> buffer = randn(second + nb + 3, 33);
      const auto weights = [&](int64_t at) {
        return std::vector<float>(buffer.begin() + at, buffer.begin() + at + nb);
      };
      const auto gemm_at = [&](int64_t at) { return run_gemm(d, g, A, buffer.data() + at, C0); };
      const auto old1 = run_gemm(d, g, A, weights(first), C0);
      const auto old2 = run_gemm(d, g, A, weights(second), C0);
      mk::WeightCopy copy(buffer.data(), int64_t(buffer.size()));
      mk::set_compute_dtype(d);
      if (g.M == 1)
        copy.refresh_for_decoding();  // the one-row product reads the plain copy
      else
        copy.refresh();
      mk::set_compute_dtype(mk::Dtype::fp32);
      EXPECT_EQ(gemm_at(first), old1);  // makes its blocked layout, where the library has one
      EXPECT_EQ(gemm_at(second), old2);
      for (float& x : buffer) x *= -3.0f;  // "an optimizer step" of both
      const auto new1 = run_gemm(d, g, A, weights(first), C0);
      mk::set_compute_dtype(d);
      copy.refresh(first, first + nb);
      mk::set_compute_dtype(mk::Dtype::fp32);
      EXPECT_EQ(gemm_at(first), new1) << "the range refreshed was not converted again";
      EXPECT_EQ(gemm_at(second), old2) << "a weight outside the range changed in the copy";
    }
  }
}

// refresh() (a training step's, a batched forward's) makes no plain bf16 copy: its blocked
// layouts are made from the buffer at each weight's first product, and a one-row product (an
// expert block of one row) converts the buffer's values at the call, making nothing.
TEST(WeightCopy, ARefreshWithoutThePlainCopyMakesNoneAndConvertsAtTheCall) {
  if (!mk::bf16_gemm_supported()) GTEST_SKIP() << "no bf16 GEMM on this CPU: fp32 only";
  const GemmCase one{false, false, 1, 50, 70, 1.0f, 1.0f}, many{false, false, 33, 47, 65, 1, 0};
  for (const GemmCase& g : {one, many}) {
    const auto A = randn(g.M * g.K, 41), C0 = randn(g.M * g.N, 42);
    std::vector<float> buffer = randn(g.K * g.N + 9, 43);
    const auto want = run_gemm(mk::Dtype::bf16, g, A, buffer.data() + 4, C0);
    mk::WeightCopy copy(buffer.data(), int64_t(buffer.size()));
    mk::set_compute_dtype(mk::Dtype::bf16);
    copy.refresh();
    mk::set_compute_dtype(mk::Dtype::fp32);
    EXPECT_EQ(run_gemm(mk::Dtype::bf16, g, A, buffer.data() + 4, C0), want);
    if (g.M == 1) {
      EXPECT_EQ(copy.bytes(), 0) << "a one-row product made the plain copy";
    } else {
      EXPECT_GT(copy.bytes(), 0) << "no blocked layout was made";
      EXPECT_LE(copy.bytes(), mk::WeightCopy::layout_bytes_bound(g.K, g.N)) << "a plain copy too";
    }
  }
}

TEST(Dtype, NamesParseAndBadOnesAreRefused) {
  for (mk::Dtype d : {mk::Dtype::fp32, mk::Dtype::bf16, mk::Dtype::bf16_emulated})
    EXPECT_EQ(mk::parse_dtype(mk::dtype_name(d)), d);
  EXPECT_THROW(mk::parse_dtype("fp16"), marin::Error);
  EXPECT_THROW(mk::resolve_dtype("bfloat16"), marin::Error);
  EXPECT_EQ(mk::resolve_dtype("fp32").dtype, mk::Dtype::fp32);
  EXPECT_EQ(mk::resolve_dtype("bf16-emulated").dtype, mk::Dtype::bf16_emulated);
  EXPECT_TRUE(mk::resolve_dtype("bf16-emulated").message.empty());
}

// auto is bf16 exactly where the real bf16 GEMM runs (and passed its start-up check), fp32
// elsewhere, and says nothing either way.
TEST(Dtype, AutoIsBf16WhereTheCpuRunsItElseFp32) {
  const mk::DtypeChoice c = mk::resolve_dtype("auto");
  EXPECT_EQ(c.dtype, mk::bf16_gemm_supported() ? mk::Dtype::bf16 : mk::Dtype::fp32);
  EXPECT_TRUE(c.message.empty()) << c.message;
}

TEST(Dtype, Bf16WithoutTheHardwareFallsBackToFp32WithOneLine) {
  const mk::DtypeChoice c = mk::resolve_dtype("bf16");
  std::string why;
  if (mk::bf16_gemm_supported(&why)) {
    EXPECT_EQ(c.dtype, mk::Dtype::bf16);
    EXPECT_TRUE(c.message.empty());
    return;
  }
  EXPECT_EQ(c.dtype, mk::Dtype::fp32);
  EXPECT_NE(c.message.find("--dtype bf16"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("computing in fp32"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find(why), std::string::npos) << c.message;
  EXPECT_EQ(c.message.find('\n'), std::string::npos) << "one line: " << c.message;
  if (!mk::cpu_has_avx512_bf16()) {
    EXPECT_NE(c.message.find("no avx512_bf16"), std::string::npos) << c.message;
  }
  // Setting bf16 directly, past the resolution, is refused rather than failing mid-GEMM.
  EXPECT_THROW(mk::set_compute_dtype(mk::Dtype::bf16), marin::Error);
  EXPECT_EQ(mk::compute_dtype(), mk::Dtype::fp32);
}

namespace {
using marin::testing::metrics;
using marin::testing::run;
using marin::testing::TempDir;
using marin::testing::write_rows;
}  // namespace

// 30 steps of `tiny` through `marin train` in fp32 and in bf16 emulation: the emulation changes
// the numbers (it ran) but not the outcome (within 2 % of the fp32 loss), and the dtype is on
// record in run.json and every metrics line.
TEST(Bf16Train, EmulatedTinyEndsWithin2PercentOfFp32) {
  TempDir tmp("bf16");
  write_rows(tmp.str("rows.bin"), 64);
  const std::string base =
      "train --preset tiny --batch 8 --steps 30 --seed 5 --rows " + tmp.str("rows.bin");
  auto r = run(base + " --dtype fp32 --out " + tmp.str("fp32"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run(base + " --dtype bf16-emulated --out " + tmp.str("emu"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto a = metrics(tmp.str("fp32")), b = metrics(tmp.str("emu"));
  ASSERT_EQ(a.size(), 30u);
  ASSERT_EQ(b.size(), 30u);
  for (const auto& m : a) EXPECT_EQ(m["dtype"], "fp32");
  for (const auto& m : b) EXPECT_EQ(m["dtype"], "bf16-emulated");
  const double la = a.back()["loss"].get<double>(), lb = b.back()["loss"].get<double>();
  std::printf("tiny, 30 steps: end loss fp32 %.6f, bf16-emulated %.6f (%+.3f %%)\n", la, lb,
              100 * (lb - la) / la);
  EXPECT_NE(la, lb) << "bf16 emulation left every GEMM unchanged";
  EXPECT_LT(std::fabs(lb - la), 0.02 * la) << "fp32 " << la << ", bf16-emulated " << lb;
  EXPECT_LT(la, a.front()["loss"].get<double>() - 1.0);  // both runs learn
  EXPECT_LT(lb, b.front()["loss"].get<double>() - 1.0);
  const auto run_json = nlohmann::json::parse(marin::read_file(tmp.str("emu/run.json")));
  EXPECT_EQ(run_json["dtype"], "bf16-emulated");
  EXPECT_EQ(run_json["options"]["dtype"], "bf16-emulated");
  // Newton–Schulz's products follow the compute dtype by default (the 535B run's bf16 NS).
  EXPECT_EQ(run_json["options"]["optimizer"]["ns_dtype"], "compute");
  // --ns-dtype fp32 keeps them in fp32: another run, also within 2 % of fp32.
  r = run(base + " --dtype bf16-emulated --ns-dtype fp32 --out " + tmp.str("emu-ns"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto c = metrics(tmp.str("emu-ns"));
  ASSERT_EQ(c.size(), 30u);
  const double lc = c.back()["loss"].get<double>();
  std::printf("  with Newton-Schulz in fp32: %.6f (%+.3f %%)\n", lc, 100 * (lc - la) / la);
  EXPECT_NE(lc, lb) << "--ns-dtype fp32 changed nothing";
  EXPECT_LT(std::fabs(lc - la), 0.02 * la) << "fp32 " << la << ", NS in fp32 " << lc;
  EXPECT_EQ(nlohmann::json::parse(
                marin::read_file(tmp.str("emu-ns/run.json")))["options"]["optimizer"]["ns_dtype"],
            "fp32");
}

// The same on the hardware, with heads of 16 (tiny's 8 has no SIMD attention): every GEMM and
// attention's products in bf16 (kernels.hpp, attention_bf16_supported) end within 2 % of fp32.
TEST(Bf16Train, HardwareTinyWithBf16AttentionEndsWithin2PercentOfFp32) {
  std::string why;
  if (!mk::bf16_gemm_supported(&why)) GTEST_SKIP() << "the real bf16 GEMM: " << why;
  if (!mk::attention_bf16_supported()) GTEST_SKIP() << "bf16 attention needs avx512_bf16";
  TempDir tmp("bf16hw");
  write_rows(tmp.str("rows.bin"), 64);
  const std::string base =
      "train --preset tiny --set head_dim=16 --batch 8 --steps 30 --seed 5 --rows " +
      tmp.str("rows.bin");
  auto r = run(base + " --dtype fp32 --out " + tmp.str("fp32"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run(base + " --dtype bf16 --out " + tmp.str("bf16"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto a = metrics(tmp.str("fp32")), b = metrics(tmp.str("bf16"));
  ASSERT_EQ(a.size(), 30u);
  ASSERT_EQ(b.size(), 30u);
  const double la = a.back()["loss"].get<double>(), lb = b.back()["loss"].get<double>();
  std::printf("tiny, heads of 16, 30 steps: end loss fp32 %.6f, bf16 %.6f (%+.3f %%)\n", la, lb,
              100 * (lb - la) / la);
  EXPECT_LT(std::fabs(lb - la), 0.02 * la) << "fp32 " << la << ", bf16 " << lb;
  EXPECT_LT(lb, b.front()["loss"].get<double>() - 1.0);  // it learns
}

// A bf16 step converts the weights once (its first micro-batch's forward, kernels::WeightCopy)
// and its later micro-batches reuse that copy: a run resumed from a checkpoint, whose first
// forward converts afresh, ends bit-identical to the uninterrupted run only if every step's copy
// held that step's weights.
TEST(Bf16Train, EmulatedResumeIsBitIdenticalWithMicroBatches) {
  TempDir tmp("bf16resume");
  write_rows(tmp.str("rows.bin"), 32);
  const std::string base =
      "train --preset tiny --batch 4 --micro-batch 2 --steps 6 --seed 3 "
      "--dtype bf16-emulated --rows " +
      tmp.str("rows.bin");
  auto r = run(base + " --out " + tmp.str("straight"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run(base + " --keep-every 3 --out " + tmp.str("split"));
  ASSERT_EQ(r.code, 0) << r.out;
  std::filesystem::remove_all(tmp.str("split/checkpoints/step-00000006"));
  ASSERT_TRUE(std::filesystem::exists(tmp.str("split/checkpoints/step-00000003")));
  r = run("train --resume " + tmp.str("split"));
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string a = marin::testing::final_weights(tmp.str("straight")),
                    b = marin::testing::final_weights(tmp.str("split"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "the resumed bf16-emulated run differs from the uninterrupted one";
}

// The request as the user makes it: `--dtype bf16` on a CPU without it trains in fp32 and says
// so once; `auto` records what it resolved to; bench reports the dtype.
TEST(Bf16Train, CliReportsTheDtypeAndTheFallback) {
  TempDir tmp("bf16cli");
  write_rows(tmp.str("rows.bin"), 16);
  const std::string base =
      "train --preset tiny --batch 4 --steps 2 --seed 5 --rows " + tmp.str("rows.bin");
  const bool hw = mk::bf16_gemm_supported();
  auto r = run(base + " --dtype bf16 --out " + tmp.str("bf16"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto m = metrics(tmp.str("bf16"));
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["dtype"], hw ? "bf16" : "fp32");
  const std::string line = "marin: --dtype bf16: ";
  if (!hw) {
    const size_t at = r.out.find(line);
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(line, at + 1), std::string::npos) << "said more than once:\n" << r.out;
  }
  r = run(base + " --out " + tmp.str("auto"));  // the default: auto
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("--dtype"), std::string::npos) << r.out;
  m = metrics(tmp.str("auto"));
  EXPECT_EQ(m[0]["dtype"], mk::resolve_dtype("auto").dtype == mk::Dtype::bf16 ? "bf16" : "fp32");
  EXPECT_EQ(nlohmann::json::parse(marin::read_file(tmp.str("auto/run.json")))["options"]["dtype"],
            "auto");
  r = run("train --preset tiny --steps 2 --dtype fp16 --rows " + tmp.str("rows.bin") + " --out " +
          tmp.str("bad"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--dtype"), std::string::npos) << r.out;

  r = run("bench --preset tiny --batch 2 --iters 1 --warmup 0 --json --dtype bf16-emulated");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["dtype"], "bf16-emulated");
  EXPECT_EQ(j["dtype_requested"], "bf16-emulated");
  r = run("bench --preset tiny --batch 2 --iters 1 --warmup 0 --train --dtype bf16");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(hw ? "dtype: bf16)" : "dtype: fp32)"), std::string::npos) << r.out;
  // Newton–Schulz in the compute dtype by default, as marin train runs it; said and kept.
  r = run("bench --preset tiny --batch 2 --iters 1 --warmup 0 --train --dtype bf16-emulated");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(its products in bf16-emulated)"), std::string::npos) << r.out;
  r =
      run("bench --preset tiny --batch 2 --iters 1 --warmup 0 --train --dtype bf16-emulated "
          "--ns-dtype fp32");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(its products in fp32)"), std::string::npos) << r.out;
  r = run("bench --preset tiny --batch 2 --iters 1 --warmup 0 --train --json --ns-dtype fp32");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out.substr(r.out.find('{')))["ns_dtype"], "fp32");
  r = run("bench --preset tiny --train --ns-dtype bf16");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--ns-dtype"), std::string::npos) << r.out;
}
