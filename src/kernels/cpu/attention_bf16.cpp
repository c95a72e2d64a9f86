// Attention's products in bf16 (issue 44): the same tiles, masks and online softmax as the fp32
// SIMD path of cpu/attention.cpp (shared through attention-inl.hpp), with every product — QKᵀ and
// P·V forward; P and dP = dO·Vᵀ recomputed, dV = Pᵀ·dO, dK = dSᵀ·Q and dQ = dS·K backward — a
// bf16 dot product with fp32 accumulation (AVX-512 BF16's vdpbf16ps: two bf16 products summed
// into each fp32 lane per instruction, twice fp32 FMA's work). Taken by attention_fwd/bwd<float>
// when the run computes in bf16 (compute_dtype(), the GEMMs' seam) and the CPU has avx512_bf16;
// the scores, the softmax, its maxima and sums, D = rowsum(dO∘O), dS = P(dP − D) and every
// accumulator stay fp32. Numerics: docs/kernels.md, "Compute dtype".
//
// vdpbf16ps reduces over pairs of adjacent bf16 values, so each product reads its reduced
// dimension in pairs: A's pair (two consecutive values of its reduced index) is broadcast as
// 32 bits, and B holds, for each pair of its rows, those two rows' elements interleaved ("paired
// rows", pair_rows). Inputs are converted once per call for what every query tile reads (K and
// V per (b, kv head)), once per tile for the tile's queries, once per key block for P and dS.
//
// Highway 1.0 has no target with avx512_bf16, so the kernels are written with the instruction's
// intrinsics inside the AVX-512 targets' copies (the functions add avx512bf16 to the target's
// attributes) and run only where the CPU reports the feature; every other target's copy answers
// false and the fp32 path runs, unchanged.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/attention_rows.hpp"
#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention_bf16.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd-inl.hpp"
// After simd-inl.hpp: the tiles, masks and online softmax shared with the fp32 kernels.
#include "kernels/cpu/attention-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {

// Every x86 target with AVX-512 (AVX3 and the newer ones, numbered below it).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
#define MARIN_BF16_ATTR __attribute__((target(HWY_TARGET_STR ",avx512bf16")))
namespace {

using u32 = uint32_t;  // a pair of bf16 values, the first in the low half

// y[0 .. n) = bf16(x · scale) (n a multiple of 16), round to nearest even as to_bf16: the rows of
// an A operand, whose consecutive values are the pairs it broadcasts.
MARIN_BF16_ATTR inline void bf16_row(const float* x, float scale, int n, u32* y) {
  const __m512 sv = _mm512_set1_ps(scale);
  for (int c = 0; c < n; c += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y) + c / 16,
                        (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_loadu_ps(x + c), sv)));
}

// out[c] = (bf16 r0[c], bf16 r1[c]) for c < cols (a multiple of 16): two rows of a B operand
// paired for the reduction over them. One conversion of both rows and one 16-bit permute.
MARIN_BF16_ATTR inline void pair_rows(const float* r0, const float* r1, int cols, u32* out) {
  alignas(64) static constexpr uint16_t kIdx[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                    21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                    11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kIdx);
  for (int c = 0; c < cols; c += 16) {
    // cvtne2ps: the low 16 values from its second argument.
    const __m512bh both = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(r1 + c), _mm512_loadu_ps(r0 + c));
    _mm512_storeu_si512(out + c, _mm512_permutexvar_epi16(idx, (__m512i)both));
  }
}

// Rows [0, rows) of x (row stride ldx, cols values) paired two by two into out[rows_p / 2][cols],
// the rows from `rows` to rows_p (even) zero.
MARIN_BF16_ATTR inline void pair_all_rows(const float* x, i64 ldx, int rows, int rows_p, int cols,
                                          u32* out) {
  alignas(64) static constexpr float kZero[128] = {};
  for (int r = 0; r < rows_p; r += 2) {
    const float* r0 = r < rows ? x + r * ldx : kZero;
    const float* r1 = r + 1 < rows ? x + (r + 1) * ldx : kZero;
    pair_rows(r0, r1, cols, out + i64(r / 2) * cols);
  }
}

// Rows [0, S) of one kv head (HD values each) in bf16, transposed by pairs: out[HD/2][ldo], pair
// e of row j at out[e * ldo + j], zero from S to ldo. The B operand of a product that reduces
// over the head dimension with the keys across the lanes.
template <int HD>
MARIN_BF16_ATTR void pack_pairs_t(const float* x, i64 ldx, int S, u32* out, int ldo) {
  alignas(64) u32 row[HD / 2];
  for (int j = 0; j < S; ++j) {
    bf16_row(x + j * ldx, 1.0f, HD, row);
    for (int e = 0; e < HD / 2; ++e) out[i64(e) * ldo + j] = row[e];
  }
  for (int e = 0; e < HD / 2; ++e) std::fill(out + i64(e) * ldo + S, out + i64(e) * ldo + ldo, 0u);
}

// C[R][16 NB] (row stride ldc) = alpha[r] C (load; alpha null: 1) or 0, plus the sum over
// kp < nkp of A[r·ars + kp·aks] · B[kp·ldb + ..]: A's bf16 pairs broadcast, B's paired rows
// 16 lanes a vector, products and sums fp32.
template <int R, int NB>
MARIN_BF16_ATTR inline void dp_block(const u32* A, i64 ars, i64 aks, const u32* B, i64 ldb, int nkp,
                                     float* C, i64 ldc, bool load, const float* alpha) {
  __m512 acc[R][NB];
  for (int r = 0; r < R; ++r) {
    const __m512 a = _mm512_set1_ps(alpha ? alpha[r] : 1.0f);
    for (int n = 0; n < NB; ++n)
      acc[r][n] =
          load ? _mm512_mul_ps(a, _mm512_loadu_ps(C + r * ldc + 16 * n)) : _mm512_setzero_ps();
  }
  for (int kp = 0; kp < nkp; ++kp) {
    __m512bh b[NB];
    for (int n = 0; n < NB; ++n) b[n] = (__m512bh)_mm512_loadu_si512(B + kp * ldb + 16 * n);
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(A[r * ars + kp * aks]));
      for (int n = 0; n < NB; ++n) acc[r][n] = _mm512_dpbf16_ps(acc[r][n], a, b[n]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) _mm512_storeu_ps(C + r * ldc + 16 * n, acc[r][n]);
}

// dp_block over C[rows][COLS]: groups of R rows, then 2, then 1, and column chunks of at most 4
// vectors, so the 16 accumulators (half the 32 registers, as the fp32 tiles) stay in registers.
template <int COLS>
MARIN_BF16_ATTR inline void dp_rows(int rows, const u32* A, i64 ars, i64 aks, const u32* B, i64 ldb,
                                    int nkp, float* C, i64 ldc, bool load, const float* alpha) {
  constexpr int NV = COLS / 16, NC = std::min(NV, 4), R = std::min(8, 16 / NC);
  static_assert(COLS % 16 == 0 && NV % NC == 0);
  for (int c0 = 0; c0 < NV; c0 += NC) {
    const u32* Bc = B + 16 * c0;
    float* Cc = C + 16 * c0;
    int r = 0;
    for (; r + R <= rows; r += R)
      dp_block<R, NC>(A + r * ars, ars, aks, Bc, ldb, nkp, Cc + r * ldc, ldc, load,
                      alpha ? alpha + r : nullptr);
    for (; r + 2 <= rows; r += 2)
      dp_block<2, NC>(A + r * ars, ars, aks, Bc, ldb, nkp, Cc + r * ldc, ldc, load,
                      alpha ? alpha + r : nullptr);
    for (; r < rows; ++r)
      dp_block<1, NC>(A + r * ars, ars, aks, Bc, ldb, nkp, Cc + r * ldc, ldc, load,
                      alpha ? alpha + r : nullptr);
  }
}

// K and V of every (b, kv head), converted once per forward: K as bf16 rows [Sp][HD] (the
// scores' A operand), V as paired rows [Sp/2][HD] (P·V's B operand); zero past S.
struct FwdPacked {
  u32* K;
  u32* V;
  size_t stride;  // u32 per (b, kv head), of each
};

// One (b, query head) of the forward: the query tiles of fwd_fast with bf16 products.
template <int HD>
MARIN_BF16_ATTR void fwd_head(const AttnShape& s, int b, int h, const float* q, const FwdPacked& kv,
                              const int32_t* segp, float* out, float* lse, const RowInfo& ri) {
  const int H = s.H, S = s.S, kvh = h / (s.H / s.kv_used);
  const i64 ldq = i64(H) * HD;
  const float scale = 1.0f / std::sqrt(float(HD));
  const size_t at = (size_t(b) * s.kv_used + kvh) * kv.stride;
  const u32 *Kb = kv.K + at, *Vp = kv.V + at;
  u32* Qt = scratch<u32>(0, size_t(HD / 2) * BQ);  // the tile's scaled queries, pairs transposed
  u32* Pp = scratch<u32>(1, size_t(BK / 2) * BQ);  // p of a block, paired over keys
  float* ScT = scratch<float>(2, size_t(BK) * BQ);
  float* O = scratch<float>(3, size_t(BQ) * HD);
  alignas(64) float m[BQ], l[BQ], alpha[BQ];
  alignas(64) u32 row[HD / 2];
  const int* lo = ri.lo.data() + size_t(b) * S;
  const int* run = ri.run.data() + size_t(b) * S;
  for (int t0 = 0; t0 < S; t0 += BQ) {
    const int nq = std::min(BQ, S - t0), tl = t0 + nq - 1;
    int klo = tl;
    for (int i = 0; i < nq; ++i) klo = std::min(klo, lo[t0 + i]);
    std::fill(Qt, Qt + HD / 2 * BQ, 0u);
    for (int i = 0; i < nq; ++i) {
      bf16_row(q + (i64(b) * S + t0 + i) * ldq + i64(h) * HD, scale, HD, row);
      for (int e = 0; e < HD / 2; ++e) Qt[e * BQ + i] = row[e];
    }
    std::fill(m, m + BQ, -std::numeric_limits<float>::infinity());
    std::fill(l, l + BQ, 0.0f);
    std::fill(O, O + BQ * HD, 0.0f);
    // Blocks start at an even key, V's pairs being (2j, 2j + 1): a key before klo is masked.
    for (int kb = klo & ~1; kb <= tl; kb += BK) {
      const int nk = std::min(BK, tl + 1 - kb);
      dp_rows<BQ>(BK, Kb + i64(kb) * (HD / 2), HD / 2, 1, Qt, BQ, HD / 2, ScT, BQ, false, nullptr);
      if (!block_full(kb, t0, tl, s.window, run))
        for (int r = 0; r < BK; ++r) mask_key_row(ScT + r * BQ, kb + r, t0, s.window, segp);
      softmax_block_t(ScT, m, l, alpha);
      // p is summed into l in fp32 above and rounded to bf16 for P·V only. A key past the last
      // query (the second of a pair, at most) has p = 0.
      pair_all_rows(ScT, BQ, BK, BK, BQ, Pp);
      dp_rows<HD>(BQ, Pp, 1, BQ, Vp + i64(kb / 2) * HD, HD, (nk + 1) / 2, O, HD, true, alpha);
    }
    for (int i = 0; i < nq; ++i) {
      const int t = t0 + i;
      float* dst = out + (i64(b) * S + t) * ldq + i64(h) * HD;
      const float inv = 1.0f / l[i];
      for (int e = 0; e < HD; ++e) dst[e] = O[i * HD + e] * inv;
      lse[(i64(b) * H + h) * S + t] = m[i] + std::log(l[i]);
    }
  }
}

template <int HD>
MARIN_BF16_ATTR void fwd_bf16(const AttnShape& s, const float* q, const float* k, const float* v,
                              const int32_t* seg, float* out, float* lse, const RowInfo& ri) {
  const int S = s.S, Sp = padded(S);
  const i64 ldkv = i64(s.kv_stored) * HD;
  const FwdPacked kv{scratch<u32>(7, size_t(s.B) * s.kv_used * Sp * HD / 2),
                     scratch<u32>(6, size_t(s.B) * s.kv_used * Sp * HD / 2), size_t(Sp) * HD / 2};
  int32_t* seg_all = scratch<int32_t>(7, size_t(s.B) * Sp);
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < s.B; ++b) {
    for (int kvh = 0; kvh < s.kv_used; ++kvh) {
      const size_t at = (size_t(b) * s.kv_used + kvh) * kv.stride;
      const i64 off = i64(b) * S * ldkv + i64(kvh) * HD;
      u32* K = kv.K + at;
      for (int j = 0; j < S; ++j) bf16_row(k + off + j * ldkv, 1.0f, HD, K + i64(j) * (HD / 2));
      std::fill(K + i64(S) * (HD / 2), K + kv.stride, 0u);
      pair_all_rows(v + off, ldkv, S, Sp, HD, kv.V + at);
      if (kvh == 0) pack_seg(seg + size_t(b) * S, S, seg_all + size_t(b) * Sp);
    }
  }
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h)
      fwd_head<HD>(s, b, h, q, kv, seg_all + size_t(b) * Sp, out, lse, ri);
}

// One key block of the backward for the tile's queries: P and dP by bf16 products, P and dS in
// fp32 (shared with the fp32 kernels), then dV, dK and dQ by bf16 products.
struct BwdTile {
  const u32 *Ke, *Ve, *Kj;   // the kv head: K, V pairs over hd transposed; K paired rows
  u32 *Qb, *dOb, *Qp, *dOp;  // the tile: Q·scale and dO as bf16 rows and as paired rows
  const float *Lv, *Dv;
  int nq, t0, tl, Sp;
};

template <int HD>
MARIN_BF16_ATTR void bwd_block(const BwdTile& u, int kb, bool full, int window, const int32_t* segp,
                               float* P, float* dS, u32* pairs, float* dQ, float* dkb, float* dvb,
                               i64 ldkv) {
  const int nk = std::min(BK, u.tl + 1 - kb);
  u32 *Pp = pairs, *dSp = pairs + BQ / 2 * BK, *dSb = pairs + BQ * BK;
  dp_rows<BK>(BQ, u.Qb, HD / 2, 1, u.Ke + kb, u.Sp, HD / 2, P, BK, false, nullptr);
  dp_rows<BK>(BQ, u.dOb, HD / 2, 1, u.Ve + kb, u.Sp, HD / 2, dS, BK, false, nullptr);
  probs_and_dscores(P, dS, u.nq, u.t0, kb, full, window, segp, u.Lv, u.Dv);
  // Rows past nq hold scores of zero queries; the dO and Q rows they pair with are zero.
  pair_all_rows(P, BK, BQ, BQ, BK, Pp);
  pair_all_rows(dS, BK, BQ, BQ, BK, dSp);
  for (int i = 0; i < u.nq; ++i) bf16_row(dS + i * BK, 1.0f, BK, dSb + i * (BK / 2));
  const int nqp = (u.nq + 1) / 2, nkp = (nk + 1) / 2;
  // dV[kb+j] += Σ_i P[i][j] dO[i];  dK[kb+j] += Σ_i dS[i][j] Qs[i];  dQ[i] += Σ_j dS[i][j] K[kb+j]
  dp_rows<HD>(nk, Pp, 1, BK, u.dOp, HD, nqp, dvb + i64(kb) * ldkv, ldkv, true, nullptr);
  dp_rows<HD>(nk, dSp, 1, BK, u.Qp, HD, nqp, dkb + i64(kb) * ldkv, ldkv, true, nullptr);
  dp_rows<HD>(u.nq, dSb, BK / 2, 1, u.Kj + i64(kb / 2) * HD, HD, nkp, dQ, HD, true, nullptr);
}

// One query of a backward tile: its rows Qs = q·scale and dOs = dO, and D = Σ dO∘O, summed in
// vector lanes, then across them: the fp32 kernels' one term at a time is a chain of HD
// dependent adds per query, a larger share of the tile once the products are bf16.
template <int HD>
MARIN_BF16_ATTR inline float tile_row(const float* q, const float* dout, const float* out,
                                      float scale, float* qi, float* doi) {
  __m512 dsum = _mm512_setzero_ps();
  for (int e = 0; e < HD; e += 16) {
    const __m512 d = _mm512_loadu_ps(dout + e);
    _mm512_storeu_ps(qi + e, _mm512_mul_ps(_mm512_loadu_ps(q + e), _mm512_set1_ps(scale)));
    _mm512_storeu_ps(doi + e, d);
    dsum = _mm512_fmadd_ps(d, _mm512_loadu_ps(out + e), dsum);
  }
  return _mm512_reduce_add_ps(dsum);
}

// One (b, kv head) of the backward: bwd_fast's loop over the group's query heads and tiles.
template <int HD>
MARIN_BF16_ATTR void bwd_kv_head(const AttnShape& s, int b, int kvh, const float* q, const float* k,
                                 const float* v, const int32_t* seg, const float* out,
                                 const float* lse, const float* dout, float* dq, float* dk,
                                 float* dv, const RowInfo& ri) {
  const int H = s.H, S = s.S, G = s.H / s.kv_used, Sp = padded(S);
  const i64 ldq = i64(H) * HD, ldkv = i64(s.kv_stored) * HD;
  const float scale = 1.0f / std::sqrt(float(HD));
  u32* Ke = scratch<u32>(0, size_t(HD / 2) * Sp);
  u32* Ve = scratch<u32>(1, size_t(HD / 2) * Sp);
  u32* Kj = scratch<u32>(2, size_t(Sp / 2) * HD);
  u32* tile = scratch<u32>(3, size_t(4) * BQ * HD / 2);
  u32* pairs = scratch<u32>(4, size_t(3) * BQ * BK / 2);
  float* Qs = scratch<float>(2, size_t(BQ) * HD);
  float* dOs = scratch<float>(3, size_t(BQ) * HD);
  float* P = scratch<float>(4, size_t(BQ) * BK);
  float* dS = scratch<float>(5, size_t(BQ) * BK);
  float* dQ = scratch<float>(6, size_t(BQ) * HD);
  int32_t* segp = scratch<int32_t>(0, size_t(Sp));
  float Dv[BQ], Lv[BQ];
  const i64 kvoff = i64(b) * S * ldkv + i64(kvh) * HD;
  float *dkb0 = dk + kvoff, *dvb0 = dv + kvoff;
  pack_pairs_t<HD>(k + kvoff, ldkv, S, Ke, Sp);
  pack_pairs_t<HD>(v + kvoff, ldkv, S, Ve, Sp);
  pair_all_rows(k + kvoff, ldkv, S, Sp, HD, Kj);
  pack_seg(seg + size_t(b) * S, S, segp);
  for (int j = 0; j < S; ++j) {
    std::fill_n(dkb0 + j * ldkv, HD, 0.0f);
    std::fill_n(dvb0 + j * ldkv, HD, 0.0f);
  }
  BwdTile u{Ke, Ve, Kj, tile, tile + BQ * HD / 2, tile + BQ * HD, tile + 3 * BQ * HD / 2, Lv, Dv,
            0,  0,  0,  Sp};
  const int* lo = ri.lo.data() + size_t(b) * S;
  const int* run = ri.run.data() + size_t(b) * S;
  for (int h = kvh * G; h < (kvh + 1) * G; ++h) {
    for (int t0 = 0; t0 < S; t0 += BQ) {
      const int nq = std::min(BQ, S - t0), tl = t0 + nq - 1;
      int klo = tl;
      for (int i = 0; i < nq; ++i) klo = std::min(klo, lo[t0 + i]);
      for (int i = 0; i < BQ; ++i) {
        float *qi = Qs + i * HD, *doi = dOs + i * HD;
        if (i < nq) {
          const i64 o = (i64(b) * S + t0 + i) * ldq + i64(h) * HD;
          Dv[i] = tile_row<HD>(q + o, dout + o, out + o, scale, qi, doi);
          Lv[i] = lse[(i64(b) * H + h) * S + t0 + i];
        } else {
          std::fill(qi, qi + HD, 0.0f);
          std::fill(doi, doi + HD, 0.0f);
        }
        bf16_row(qi, 1.0f, HD, u.Qb + i * (HD / 2));
        bf16_row(doi, 1.0f, HD, u.dOb + i * (HD / 2));
      }
      pair_all_rows(Qs, HD, BQ, BQ, HD, u.Qp);
      pair_all_rows(dOs, HD, BQ, BQ, HD, u.dOp);
      u.nq = nq, u.t0 = t0, u.tl = tl;
      std::fill(dQ, dQ + BQ * HD, 0.0f);
      // Blocks start at an even key, K's pairs being (2j, 2j + 1): a key before klo is masked.
      for (int kb = klo & ~1; kb <= tl; kb += BK)
        bwd_block<HD>(u, kb, block_full(kb, t0, tl, s.window, run), s.window, segp, P, dS, pairs,
                      dQ, dkb0, dvb0, ldkv);
      for (int i = 0; i < nq; ++i) {
        float* dst = dq + (i64(b) * S + t0 + i) * ldq + i64(h) * HD;
        for (int e = 0; e < HD; ++e) dst[e] = dQ[i * HD + e] * scale;
      }
    }
  }
}

template <int HD>
MARIN_BF16_ATTR void bwd_bf16(const AttnShape& s, const float* q, const float* k, const float* v,
                              const int32_t* seg, const float* out, const float* lse,
                              const float* dout, float* dq, float* dk, float* dv,
                              const RowInfo& ri) {
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < s.B; ++b)
    for (int kvh = 0; kvh < s.kv_used; ++kvh)
      bwd_kv_head<HD>(s, b, kvh, q, k, v, seg, out, lse, dout, dq, dk, dv, ri);
}

}  // namespace

bool AttnBf16Compiled() {
  return true;
}

// The dispatched entry points: false when this head dimension has no bf16 kernel.
bool AttnFwdBf16(const AttnShape& s, const float* q, const float* k, const float* v,
                 const int32_t* seg, float* out, float* lse, const RowInfo& ri) {
  return with_head_dim(
      s.hd, [&](auto hd) { fwd_bf16<decltype(hd)::value>(s, q, k, v, seg, out, lse, ri); });
}

bool AttnBwdBf16(const AttnShape& s, const float* q, const float* k, const float* v,
                 const int32_t* seg, const float* out, const float* lse, const float* dout,
                 float* dq, float* dk, float* dv, const RowInfo& ri) {
  return with_head_dim(s.hd, [&](auto hd) {
    bwd_bf16<decltype(hd)::value>(s, q, k, v, seg, out, lse, dout, dq, dk, dv, ri);
  });
}
#undef MARIN_BF16_ATTR

#else  // a target without AVX-512: the fp32 kernels run

bool AttnBf16Compiled() {
  return false;
}
bool AttnFwdBf16(const AttnShape&, const float*, const float*, const float*, const int32_t*, float*,
                 float*, const RowInfo&) {
  return false;
}
bool AttnBwdBf16(const AttnShape&, const float*, const float*, const float*, const int32_t*,
                 const float*, const float*, const float*, float*, float*, float*, const RowInfo&) {
  return false;
}

#endif
}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(AttnBf16Compiled);
HWY_EXPORT(AttnFwdBf16);
HWY_EXPORT(AttnBwdBf16);

bool attention_fwd_bf16(const AttnShape& s, const float* q, const float* k, const float* v,
                        const int32_t* seg, float* out, float* lse, const RowInfo& ri) {
  return attention_bf16_supported() &&
         HWY_DYNAMIC_DISPATCH(AttnFwdBf16)(s, q, k, v, seg, out, lse, ri);
}

bool attention_bwd_bf16(const AttnShape& s, const float* q, const float* k, const float* v,
                        const int32_t* seg, const float* out, const float* lse, const float* dout,
                        float* dq, float* dk, float* dv, const RowInfo& ri) {
  return attention_bf16_supported() &&
         HWY_DYNAMIC_DISPATCH(AttnBwdBf16)(s, q, k, v, seg, out, lse, dout, dq, dk, dv, ri);
}
}  // namespace cpu

bool attention_bf16_supported() {
  static const bool cpu_has = __builtin_cpu_supports("avx512bf16");
  return cpu_has && HWY_DYNAMIC_DISPATCH(cpu::AttnBf16Compiled)();
}

}  // namespace marin::kernels
#endif  // HWY_ONCE
