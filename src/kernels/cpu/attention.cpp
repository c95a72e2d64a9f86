// Causal / sliding-window attention with segment ids and GQA, flash-attention style: queries in
// tiles, keys in blocks, online softmax; the S x S score matrix is never formed.
//
// Implementations behind the same entry points:
//  * generic (any T, any hd): one query at a time, exact math; used for double (finite-difference
//    checks) and for float shapes the fast path does not cover.
//  * SIMD float for hd in {16, 32, 64, 128}, compiled once per Highway target (AVX2, AVX-512, a
//    128-bit baseline) and chosen at start-up: BQ x BK tiles whose scores are register-blocked
//    outer products, vectorised masking and exp. The forward computes a tile's scores transposed
//    (a key per row, queries across the lanes: K packed by rows, the query tile transposed) so
//    the online softmax is vertical vector arithmetic; the backward packs K and V transposed.
//  * for float where the run computes in bf16 on a CPU with avx512_bf16, the same tiles with
//    bf16 dot products (cpu/attention_bf16.cpp), tried first.
// Forward parallelises over (b, query head); backward over (b, kv head), so every dk/dv row is
// owned by one thread and the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/profile.hpp"
#include "kernels/cpu/attention_rows.hpp"
#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/simd-inl.hpp"
// After simd-inl.hpp: the tiles, masks and online softmax shared with attention_bf16.cpp.
#include "kernels/cpu/attention-inl.hpp"

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {
namespace {

// Accumulators of the register-blocked products below. On the 16-register targets 12 (with the
// loaded vectors and broadcasts filling the rest) keep both FMA pipes busy where 8 left them
// waiting on the FMA latency: AVX2 attention 20-25 % faster (bench_attention, MARIN_ISA=avx2).
constexpr int kAccumRegs = kAccRegs >= 16 ? kAccRegs : 12;

// C[R][kLanes*NB] = A[R][K] (row stride lda) x Bt[K][kLanes*NB] (row stride ldb).
template <int R, int NB, int K>
HWY_INLINE void mk_outer(const float* A, int lda, const float* Bt, i64 ldb, float* C, int ldc) {
  const D d;
  V acc[R][NB];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) acc[r][n] = hn::Zero(d);
  for (int k = 0; k < K; ++k) {
    V bv[NB];
    for (int n = 0; n < NB; ++n) bv[n] = hn::LoadU(d, Bt + k * ldb + kLanes * n);
    for (int r = 0; r < R; ++r) {
      const V a = hn::Set(d, A[r * lda + k]);
      for (int n = 0; n < NB; ++n) acc[r][n] = hn::MulAdd(a, bv[n], acc[r][n]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) hn::StoreU(acc[r][n], d, C + r * ldc + kLanes * n);
}

// Sc[ROWS][COLS] = A[ROWS][HD] x Bt[HD][COLS] (row stride ldb): R rows by NB vectors of columns
// at a time, so one group's accumulators stay in registers (8 x 2 vectors on AVX-512; 6 x 2 on
// AVX2, then 2 x 2 for the last rows).
template <int HD, int ROWS, int COLS>
HWY_INLINE void scores(const float* A, const float* Bt, i64 ldb, float* Sc) {
  constexpr int NB = std::min(COLS / kLanes, 2);
  constexpr int R = std::min(8, kAccumRegs / NB);
  static_assert(R % 2 == 0 && ROWS % 2 == 0 && COLS % (NB * kLanes) == 0);
  for (int c0 = 0; c0 < COLS; c0 += NB * kLanes) {
    int r = 0;
    for (; r + R <= ROWS; r += R)
      mk_outer<R, NB, HD>(A + r * HD, HD, Bt + c0, ldb, Sc + r * COLS + c0, COLS);
    for (; r < ROWS; r += 2)
      mk_outer<2, NB, HD>(A + r * HD, HD, Bt + c0, ldb, Sc + r * COLS + c0, COLS);
  }
}

// C[R][NC lanes-vectors] (row stride ldc) = alpha[r] * C + sum_{k<nk} P[r*prs + k*pks] * X[k][.]
// (row stride ldx): a column chunk of NC vectors.
template <int R, int NC>
HWY_INLINE void mk_accum(const float* P, i64 prs, i64 pks, int nk, const float* X, i64 ldx,
                         float* C, i64 ldc, const float* alpha) {
  const D d;
  V acc[R][NC];
  for (int r = 0; r < R; ++r) {
    const V a = hn::Set(d, alpha ? alpha[r] : 1.0f);
    for (int c = 0; c < NC; ++c) acc[r][c] = hn::Mul(a, hn::LoadU(d, C + r * ldc + kLanes * c));
  }
  for (int kk = 0; kk < nk; ++kk) {
    V p[R];
    for (int r = 0; r < R; ++r) p[r] = hn::Set(d, P[r * prs + kk * pks]);
    for (int c = 0; c < NC; ++c) {
      const V xv = hn::LoadU(d, X + kk * ldx + kLanes * c);
      for (int r = 0; r < R; ++r) acc[r][c] = hn::MulAdd(p[r], xv, acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NC; ++c) hn::StoreU(acc[r][c], d, C + r * ldc + kLanes * c);
}

// Rows of C[rows][HD] in groups of R, then one at a time; columns in chunks of at most
// kAccRegs vectors so the accumulators stay in registers for every head dimension.
template <int HD>
HWY_INLINE void accum_rows(int rows, const float* P, i64 prs, i64 pks, int nk, const float* X,
                           i64 ldx, float* C, i64 ldc, const float* alpha) {
  constexpr int NV = HD / kLanes;
  constexpr int NC = std::min(NV, kAccRegs);
  static_assert(HD % kLanes == 0 && NV % NC == 0);
  constexpr int R = std::max(1, std::min(8, kAccumRegs / NC));
  for (int c0 = 0; c0 < HD; c0 += NC * kLanes) {
    int r = 0;
    for (; r + R <= rows; r += R)
      mk_accum<R, NC>(P + i64(r) * prs, prs, pks, nk, X + c0, ldx, C + r * ldc + c0, ldc,
                      alpha ? alpha + r : nullptr);
    if constexpr (R > 2)
      for (; r + 2 <= rows; r += 2)
        mk_accum<2, NC>(P + i64(r) * prs, prs, pks, nk, X + c0, ldx, C + r * ldc + c0, ldc,
                        alpha ? alpha + r : nullptr);
    for (; r < rows; ++r)
      mk_accum<1, NC>(P + i64(r) * prs, prs, pks, nk, X + c0, ldx, C + r * ldc + c0, ldc,
                      alpha ? alpha + r : nullptr);
  }
}

// Packs rows [0,S) of one kv head into Xt[HD][ldt] (transposed), zero-padded to ldt.
template <int HD>
void pack_t(const float* x, i64 ldx, int S, float* Xt, int ldt) {
  for (int j = 0; j < S; ++j)
    for (int d = 0; d < HD; ++d) Xt[i64(d) * ldt + j] = x[j * ldx + d];
  for (int d = 0; d < HD; ++d) std::fill(Xt + i64(d) * ldt + S, Xt + i64(d) * ldt + ldt, 0.0f);
}

// Packs rows [0,S) of one kv head into Xp[Sp][HD] (rows contiguous), zero rows up to Sp.
template <int HD>
void pack_rows(const float* x, i64 ldx, int S, float* Xp, int Sp) {
  for (int j = 0; j < S; ++j) std::copy(x + j * ldx, x + j * ldx + HD, Xp + i64(j) * HD);
  std::fill(Xp + i64(S) * HD, Xp + i64(Sp) * HD, 0.0f);
}

template <int HD>
void fwd_fast(const AttnShape& s, const float* q, const float* k, const float* v,
              const int32_t* seg, float* out, float* lse, const RowInfo& ri) {
  const int H = s.H, S = s.S, G = s.H / s.kv_used, Sp = padded(S);
  const i64 ldq = i64(H) * HD, ldkv = i64(s.kv_stored) * HD;
  const float scale = 1.0f / std::sqrt(float(HD));
  // K (rows zero-padded to Sp) and padded segment ids are packed once per (b, kv head) into the
  // caller's scratch (slots the per-task code below does not use) and shared by the query heads
  // of the group.
  const size_t kpsz = size_t(HD) * Sp;
  float* Kp_all = scratch<float>(7, size_t(s.B) * s.kv_used * kpsz);
  int32_t* seg_all = scratch<int32_t>(7, size_t(s.B) * Sp);
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < s.B; ++b) {
    for (int kvh = 0; kvh < s.kv_used; ++kvh) {
      pack_rows<HD>(k + i64(b) * S * ldkv + i64(kvh) * HD, ldkv, S,
                    Kp_all + (size_t(b) * s.kv_used + kvh) * kpsz, Sp);
      if (kvh == 0) pack_seg(seg + size_t(b) * S, S, seg_all + size_t(b) * Sp);
    }
  }
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < H; ++h) {
      const int kvh = h / G;
      const float* Kp = Kp_all + (size_t(b) * s.kv_used + kvh) * kpsz;
      const int32_t* segp = seg_all + size_t(b) * Sp;
      float* Qt = scratch<float>(1, size_t(HD) * BQ);  // the query tile, transposed and scaled
      float* ScT = scratch<float>(2, size_t(BK) * BQ);
      float* O = scratch<float>(3, size_t(BQ) * HD);
      alignas(64) float m[BQ], l[BQ], alpha[BQ];
      const float* vb0 = v + i64(b) * S * ldkv + i64(kvh) * HD;
      const int* lo = ri.lo.data() + size_t(b) * S;
      const int* run = ri.run.data() + size_t(b) * S;
      for (int t0 = 0; t0 < S; t0 += BQ) {
        const int nq = std::min(BQ, S - t0), tl = t0 + nq - 1;
        int klo = tl;
        for (int i = 0; i < nq; ++i) klo = std::min(klo, lo[t0 + i]);
        std::fill(Qt, Qt + HD * BQ, 0.0f);
        for (int i = 0; i < nq; ++i) {
          const float* src = q + (i64(b) * S + t0 + i) * ldq + i64(h) * HD;
          for (int e = 0; e < HD; ++e) Qt[e * BQ + i] = src[e] * scale;
        }
        std::fill(m, m + BQ, -std::numeric_limits<float>::infinity());
        std::fill(l, l + BQ, 0.0f);
        std::fill(O, O + BQ * HD, 0.0f);
        for (int kb = klo; kb <= tl; kb += BK) {
          const int nk = std::min(BK, tl + 1 - kb);
          scores<HD, BK, BQ>(Kp + i64(kb) * HD, Qt, BQ, ScT);
          if (!block_full(kb, t0, tl, s.window, run))
            for (int r = 0; r < BK; ++r) mask_key_row(ScT + r * BQ, kb + r, t0, s.window, segp);
          softmax_block_t(ScT, m, l, alpha);
          // O[i] = alpha[i] O[i] + sum_r p[r][i] V[kb + r]: the keys past the last query are
          // masked (p = 0) and not read.
          accum_rows<HD>(BQ, ScT, 1, BQ, nk, vb0 + i64(kb) * ldkv, ldkv, O, HD, alpha);
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
  }
}

template <int HD>
void bwd_fast(const AttnShape& s, const float* q, const float* k, const float* v,
              const int32_t* seg, const float* out, const float* lse, const float* dout, float* dq,
              float* dk, float* dv, const RowInfo& ri) {
  const int H = s.H, S = s.S, G = s.H / s.kv_used, Sp = padded(S);
  const i64 ldq = i64(H) * HD, ldkv = i64(s.kv_stored) * HD;
  const float scale = 1.0f / std::sqrt(float(HD));
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < s.B; ++b) {
    for (int kvh = 0; kvh < s.kv_used; ++kvh) {
      float* Kt = scratch<float>(0, size_t(HD) * Sp);
      float* Vt = scratch<float>(1, size_t(HD) * Sp);
      float* Qs = scratch<float>(2, size_t(BQ) * HD);
      float* dOs = scratch<float>(3, size_t(BQ) * HD);
      float* P = scratch<float>(4, size_t(BQ) * BK);
      float* dS = scratch<float>(5, size_t(BQ) * BK);
      float* dQ = scratch<float>(6, size_t(BQ) * HD);
      int32_t* segp = scratch<int32_t>(0, size_t(Sp));
      float Dv[BQ], Lv[BQ];
      const i64 kvoff = i64(b) * S * ldkv + i64(kvh) * HD;
      const float *kb0 = k + kvoff, *vb0 = v + kvoff;
      float *dkb0 = dk + kvoff, *dvb0 = dv + kvoff;
      pack_t<HD>(kb0, ldkv, S, Kt, Sp);
      pack_t<HD>(vb0, ldkv, S, Vt, Sp);
      pack_seg(seg + size_t(b) * S, S, segp);
      for (int j = 0; j < S; ++j) {
        std::fill_n(dkb0 + j * ldkv, HD, 0.0f);
        std::fill_n(dvb0 + j * ldkv, HD, 0.0f);
      }
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
              float Dsum = 0;
              for (int e = 0; e < HD; ++e) {
                qi[e] = q[o + e] * scale;
                doi[e] = dout[o + e];
                Dsum += dout[o + e] * out[o + e];
              }
              Dv[i] = Dsum;
              Lv[i] = lse[(i64(b) * H + h) * S + t0 + i];
            } else {
              std::fill(qi, qi + HD, 0.0f);
              std::fill(doi, doi + HD, 0.0f);
            }
          }
          std::fill(dQ, dQ + BQ * HD, 0.0f);
          for (int kb = klo; kb <= tl; kb += BK) {
            const int nk = std::min(BK, tl + 1 - kb);
            const bool full = block_full(kb, t0, tl, s.window, run);
            scores<HD, BQ, BK>(Qs, Kt + kb, Sp, P);
            scores<HD, BQ, BK>(dOs, Vt + kb, Sp, dS);
            probs_and_dscores(P, dS, nq, t0, kb, full, s.window, segp, Lv, Dv);
            // dV[kb+j] += sum_i P[i][j] dO[i];  dK[kb+j] += sum_i dS[i][j] Qs[i]
            accum_rows<HD>(nk, P, 1, BK, nq, dOs, HD, dvb0 + i64(kb) * ldkv, ldkv, nullptr);
            accum_rows<HD>(nk, dS, 1, BK, nq, Qs, HD, dkb0 + i64(kb) * ldkv, ldkv, nullptr);
            // dQ[i] += sum_j dS[i][j] K[kb+j]   (times scale below)
            accum_rows<HD>(nq, dS, BK, 1, nk, kb0 + i64(kb) * ldkv, ldkv, dQ, HD, nullptr);
          }
          for (int i = 0; i < nq; ++i) {
            float* dst = dq + (i64(b) * S + t0 + i) * ldq + i64(h) * HD;
            for (int e = 0; e < HD; ++e) dst[e] = dQ[i * HD + e] * scale;
          }
        }
      }
    }
  }
}

}  // namespace

// The dispatched entry points: false when this head dimension has no fast path.
bool AttnFwdF32(const AttnShape& s, const float* q, const float* k, const float* v,
                const int32_t* seg, float* out, float* lse, const RowInfo& ri) {
  return with_head_dim(
      s.hd, [&](auto hd) { fwd_fast<decltype(hd)::value>(s, q, k, v, seg, out, lse, ri); });
}

bool AttnBwdF32(const AttnShape& s, const float* q, const float* k, const float* v,
                const int32_t* seg, const float* out, const float* lse, const float* dout,
                float* dq, float* dk, float* dv, const RowInfo& ri) {
  return with_head_dim(s.hd, [&](auto hd) {
    bwd_fast<decltype(hd)::value>(s, q, k, v, seg, out, lse, dout, dq, dk, dv, ri);
  });
}

}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace marin::kernels {

namespace cpu {
HWY_EXPORT(AttnFwdF32);
HWY_EXPORT(AttnBwdF32);
}  // namespace cpu

namespace {

using cpu::RowInfo;
using cpu::visible;

// ------------------------------------------------------------------------------------------------
// Generic path.
template <class T>
void fwd_generic(const AttnShape& s, const T* q, const T* k, const T* v, const int32_t* seg, T* out,
                 T* lse, const RowInfo& ri) {
  const int H = s.H, hd = s.hd, G = s.H / s.kv_used;
  const i64 ldq = i64(H) * hd, ldkv = i64(s.kv_stored) * hd;
  const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < H; ++h) {
      const int kvh = h / G;
      const int32_t* sg = seg + size_t(b) * s.S;
      std::vector<T> acc(hd);
      for (int t = 0; t < s.S; ++t) {
        const T* qt = q + (i64(b) * s.S + t) * ldq + i64(h) * hd;
        T m = -std::numeric_limits<T>::infinity(), l = 0;
        std::fill(acc.begin(), acc.end(), T(0));
        for (int j = ri.lo[size_t(b) * s.S + t]; j <= t; ++j) {
          if (!visible(s, sg, t, j)) continue;
          const T* kj = k + (i64(b) * s.S + j) * ldkv + i64(kvh) * hd;
          const T* vj = v + (i64(b) * s.S + j) * ldkv + i64(kvh) * hd;
          T sc = 0;
          for (int d = 0; d < hd; ++d) sc += qt[d] * kj[d];
          sc *= scale;
          if (sc > m) {
            const T alpha = std::exp(m - sc);
            l *= alpha;
            for (int d = 0; d < hd; ++d) acc[d] *= alpha;
            m = sc;
          }
          const T p = std::exp(sc - m);
          l += p;
          for (int d = 0; d < hd; ++d) acc[d] += p * vj[d];
        }
        T* ot = out + (i64(b) * s.S + t) * ldq + i64(h) * hd;
        for (int d = 0; d < hd; ++d) ot[d] = acc[d] / l;
        lse[(i64(b) * H + h) * s.S + t] = m + std::log(l);
      }
    }
  }
}

template <class T>
void bwd_generic(const AttnShape& s, const T* q, const T* k, const T* v, const int32_t* seg,
                 const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv,
                 const RowInfo& ri) {
  const int H = s.H, hd = s.hd, G = s.H / s.kv_used;
  const i64 ldq = i64(H) * hd, ldkv = i64(s.kv_stored) * hd;
  const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < s.B; ++b) {
    for (int kvh = 0; kvh < s.kv_used; ++kvh) {
      const int32_t* sg = seg + size_t(b) * s.S;
      for (int j = 0; j < s.S; ++j) {
        std::fill_n(dk + (i64(b) * s.S + j) * ldkv + i64(kvh) * hd, hd, T(0));
        std::fill_n(dv + (i64(b) * s.S + j) * ldkv + i64(kvh) * hd, hd, T(0));
      }
      for (int h = kvh * G; h < (kvh + 1) * G; ++h) {
        for (int t = 0; t < s.S; ++t) {
          const i64 qo = (i64(b) * s.S + t) * ldq + i64(h) * hd;
          const T *qt = q + qo, *ot = out + qo, *dot = dout + qo;
          T* dqt = dq + qo;
          const T L = lse[(i64(b) * H + h) * s.S + t];
          T D = 0;
          for (int d = 0; d < hd; ++d) D += dot[d] * ot[d];
          std::fill_n(dqt, hd, T(0));
          for (int j = ri.lo[size_t(b) * s.S + t]; j <= t; ++j) {
            if (!visible(s, sg, t, j)) continue;
            const i64 ko = (i64(b) * s.S + j) * ldkv + i64(kvh) * hd;
            const T *kj = k + ko, *vj = v + ko;
            T sc = 0, dp = 0;
            for (int d = 0; d < hd; ++d) sc += qt[d] * kj[d], dp += dot[d] * vj[d];
            const T p = std::exp(sc * scale - L);
            const T ds = p * (dp - D) * scale;
            T *dkj = dk + ko, *dvj = dv + ko;
            for (int d = 0; d < hd; ++d) {
              dqt[d] += ds * kj[d];
              dkj[d] += ds * qt[d];
              dvj[d] += p * dot[d];
            }
          }
        }
      }
    }
  }
}

template <class T>
bool try_fast_fwd(const AttnShape&, const T*, const T*, const T*, const int32_t*, T*, T*,
                  const RowInfo&) {
  return false;
}
template <class T>
bool try_fast_bwd(const AttnShape&, const T*, const T*, const T*, const int32_t*, const T*,
                  const T*, const T*, T*, T*, T*, const RowInfo&) {
  return false;
}

// Float: the bf16 products where the run computes in bf16 and the CPU has them (the GEMMs'
// seam, compute_dtype()), else the fp32 tiles.
template <>
bool try_fast_fwd<float>(const AttnShape& s, const float* q, const float* k, const float* v,
                         const int32_t* seg, float* out, float* lse, const RowInfo& ri) {
  if (compute_dtype() == Dtype::bf16 && cpu::attention_fwd_bf16(s, q, k, v, seg, out, lse, ri))
    return true;
  return HWY_DYNAMIC_DISPATCH(cpu::AttnFwdF32)(s, q, k, v, seg, out, lse, ri);
}
template <>
bool try_fast_bwd<float>(const AttnShape& s, const float* q, const float* k, const float* v,
                         const int32_t* seg, const float* out, const float* lse, const float* dout,
                         float* dq, float* dk, float* dv, const RowInfo& ri) {
  if (compute_dtype() == Dtype::bf16 &&
      cpu::attention_bwd_bf16(s, q, k, v, seg, out, lse, dout, dq, dk, dv, ri))
    return true;
  return HWY_DYNAMIC_DISPATCH(cpu::AttnBwdF32)(s, q, k, v, seg, out, lse, dout, dq, dk, dv, ri);
}

}  // namespace

namespace {
// The products' FLOPs of a forward (QKᵀ and PV: 2 · 2·hd per visible query-key pair and head),
// counting the causal window's pairs and not the segment masks (the model's nominal FLOPs), for
// the per-op profile.
double attention_fwd_flops(const AttnShape& s) {
  const double S = s.S, W = s.window > 0 && s.window < s.S ? s.window : s.S;
  const double pairs = W * (W + 1) / 2 + (S - W) * W;  // Σ_t min(t + 1, W)
  return 4.0 * s.hd * double(s.H) * double(s.B) * pairs;
}
}  // namespace

template <class T>
void attention_fwd(const AttnShape& s, const T* q, const T* k, const T* v, const int32_t* seg,
                   T* out, T* lse) {
  profile::add_flops(attention_fwd_flops(s));
  const RowInfo ri = cpu::row_info(s, seg);
  if (!try_fast_fwd<T>(s, q, k, v, seg, out, lse, ri)) fwd_generic(s, q, k, v, seg, out, lse, ri);
}

template <class T>
void attention_bwd(const AttnShape& s, const T* q, const T* k, const T* v, const int32_t* seg,
                   const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv) {
  profile::add_flops(2 * attention_fwd_flops(s));  // dQ, dK, dV and dP: twice the forward
  const RowInfo ri = cpu::row_info(s, seg);
  if (!try_fast_bwd<T>(s, q, k, v, seg, out, lse, dout, dq, dk, dv, ri))
    bwd_generic(s, q, k, v, seg, out, lse, dout, dq, dk, dv, ri);
  // Stored-but-unused kv heads get a zero gradient.
  const i64 ldkv = i64(s.kv_stored) * s.hd;
  if (s.kv_stored > s.kv_used) {
    const i64 rows = i64(s.B) * s.S, n = i64(s.kv_stored - s.kv_used) * s.hd;
    for (i64 r = 0; r < rows; ++r) {
      std::fill_n(dk + r * ldkv + i64(s.kv_used) * s.hd, n, T(0));
      std::fill_n(dv + r * ldkv + i64(s.kv_used) * s.hd, n, T(0));
    }
  }
}

#define MARIN_INST(T)                                                                            \
  template void attention_fwd<T>(const AttnShape&, const T*, const T*, const T*, const int32_t*, \
                                 T*, T*);                                                        \
  template void attention_bwd<T>(const AttnShape&, const T*, const T*, const T*, const int32_t*, \
                                 const T*, const T*, const T*, T*, T*, T*);
MARIN_INST(float)
MARIN_INST(double)
#undef MARIN_INST

}  // namespace marin::kernels
#endif  // HWY_ONCE
