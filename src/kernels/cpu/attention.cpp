// Causal / sliding-window attention with segment ids and GQA, flash-attention style: queries in
// tiles, keys in blocks, online softmax; the S x S score matrix is never formed.
//
// Two implementations behind the same entry points:
//  * generic (any T, any hd): one query at a time, exact math; used for double (finite-difference
//    checks) and for float shapes the fast path does not cover.
//  * AVX-512 float for hd in {16, 32, 64, 128}: BQ x BK tiles, K/V packed transposed per
//    (row, kv head) so scores are register-blocked outer products, vectorised masking and exp.
// Forward parallelises over (b, query head); backward over (b, kv head), so every dk/dv row is
// owned by one thread and the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

namespace marin::kernels {

namespace {

// Per-row visibility helpers shared by both paths.
//  lo[t]: smallest key index that can be visible from t (window and first occurrence of seg[t]).
//  run[t]: start of the run of equal segment ids that contains t.
struct RowInfo {
  std::vector<int> lo, run;
};

RowInfo row_info(const AttnShape& s, const int32_t* seg) {
  RowInfo ri;
  ri.lo.resize(size_t(s.B) * s.S);
  ri.run.resize(size_t(s.B) * s.S);
  std::unordered_map<int32_t, int> first;
  for (int b = 0; b < s.B; ++b) {
    first.clear();
    const int32_t* sg = seg + size_t(b) * s.S;
    int* lo = ri.lo.data() + size_t(b) * s.S;
    int* run = ri.run.data() + size_t(b) * s.S;
    for (int t = 0; t < s.S; ++t) {
      const int f = first.emplace(sg[t], t).first->second;
      lo[t] = s.window > 0 ? std::max(f, t - s.window + 1) : f;
      run[t] = (t > 0 && sg[t - 1] == sg[t]) ? run[t - 1] : t;
    }
  }
  return ri;
}

inline bool visible(const AttnShape& s, const int32_t* sg, int t, int j) {
  return j <= t && sg[j] == sg[t] && (s.window == 0 || t - s.window < j);
}

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

// ------------------------------------------------------------------------------------------------
// AVX-512 float path.
#ifdef __AVX512F__
#ifndef MARIN_ATTN_BQ
#define MARIN_ATTN_BQ 32
#define MARIN_ATTN_BK 32
#endif
constexpr int BQ = MARIN_ATTN_BQ;  // query tile (multiple of 8)
constexpr int BK = MARIN_ATTN_BK;  // key block (multiple of 32)

// C[R][16*NB] = A[R][K] (row stride lda) x Bt[K][16*NB] (row stride ldb).
template <int R, int NB, int K>
inline void mk_outer(const float* A, int lda, const float* Bt, i64 ldb, float* C, int ldc) {
  __m512 acc[R][NB];
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) acc[r][n] = _mm512_setzero_ps();
  for (int d = 0; d < K; ++d) {
    __m512 bv[NB];
    for (int n = 0; n < NB; ++n) bv[n] = _mm512_loadu_ps(Bt + d * ldb + 16 * n);
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(A[r * lda + d]);
      for (int n = 0; n < NB; ++n) acc[r][n] = _mm512_fmadd_ps(a, bv[n], acc[r][n]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NB; ++n) _mm512_storeu_ps(C + r * ldc + 16 * n, acc[r][n]);
}

// C[R][HD] (row stride ldc) = alpha[r] * C + sum_{k<nk} P[r*prs + k*pks] * X[k][HD] (stride ldx).
template <int R, int HD>
inline void mk_accum(const float* P, i64 prs, i64 pks, int nk, const float* X, i64 ldx, float* C,
                     i64 ldc, const float* alpha) {
  constexpr int NC = HD / 16;
  __m512 acc[R][NC];
  for (int r = 0; r < R; ++r) {
    const __m512 a = _mm512_set1_ps(alpha ? alpha[r] : 1.0f);
    for (int c = 0; c < NC; ++c)
      acc[r][c] = _mm512_mul_ps(a, _mm512_loadu_ps(C + r * ldc + 16 * c));
  }
  for (int kk = 0; kk < nk; ++kk) {
    __m512 xv[NC];
    for (int c = 0; c < NC; ++c) xv[c] = _mm512_loadu_ps(X + kk * ldx + 16 * c);
    for (int r = 0; r < R; ++r) {
      const __m512 p = _mm512_set1_ps(P[r * prs + kk * pks]);
      for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_fmadd_ps(p, xv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(C + r * ldc + 16 * c, acc[r][c]);
}

// rows of C in groups of R, then one at a time.
template <int HD>
inline void accum_rows(int rows, const float* P, i64 prs, i64 pks, int nk, const float* X, i64 ldx,
                       float* C, i64 ldc, const float* alpha) {
  constexpr int R = std::min(8, 16 / (HD / 16));
  int r = 0;
  for (; r + R <= rows; r += R)
    mk_accum<R, HD>(P + i64(r) * prs, prs, pks, nk, X, ldx, C + r * ldc, ldc,
                    alpha ? alpha + r : nullptr);
  for (; r < rows; ++r)
    mk_accum<1, HD>(P + i64(r) * prs, prs, pks, nk, X, ldx, C + r * ldc, ldc,
                    alpha ? alpha + r : nullptr);
}

// Sc[BQ][BK] = A[BQ][HD] x Bt[HD][kb .. kb+BK).
template <int HD>
inline void scores(const float* A, const float* Bt, i64 ldb, float* Sc) {
  for (int r = 0; r < BQ; r += 8) {
    for (int n = 0; n < BK; n += 32)
      mk_outer<8, 2, HD>(A + r * HD, HD, Bt + n, ldb, Sc + r * BK + n, BK);
  }
}

// Sets masked entries of one score row (query t, keys kb..kb+BK) to -inf.
inline void mask_row(float* row, int t, int kb, int window, const int32_t* segp, int32_t segt) {
  const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i tv = _mm512_set1_epi32(t), sv = _mm512_set1_epi32(segt);
  const __m512i wv = _mm512_set1_epi32(t - window);
  for (int c = 0; c < BK / 16; ++c) {
    const __m512i j = _mm512_add_epi32(_mm512_set1_epi32(kb + 16 * c), iota);
    __mmask16 ok = _mm512_cmple_epi32_mask(j, tv);
    ok &= _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(segp + kb + 16 * c), sv);
    if (window > 0) ok &= _mm512_cmpgt_epi32_mask(j, wv);
    _mm512_storeu_ps(row + 16 * c, _mm512_mask_blend_ps(ok, ninf, _mm512_loadu_ps(row + 16 * c)));
  }
}

// Packs rows [0,S) of one kv head into Xt[HD][ldt] (transposed); seg into segp with padding.
template <int HD>
void pack_t(const float* x, i64 ldx, int S, float* Xt, int ldt) {
  for (int j = 0; j < S; ++j)
    for (int d = 0; d < HD; ++d) Xt[i64(d) * ldt + j] = x[j * ldx + d];
  for (int d = 0; d < HD; ++d) std::fill(Xt + i64(d) * ldt + S, Xt + i64(d) * ldt + ldt, 0.0f);
}

inline int padded(int S) {
  return (S + BK + 15) / 16 * 16;
}

inline void pack_seg(const int32_t* seg, int S, int32_t* segp) {
  std::copy(seg, seg + S, segp);
  std::fill(segp + S, segp + padded(S), 0);
}

// True when every key in [kb, kb+BK) is visible from every query in [t0, tl].
inline bool block_full(int kb, int t0, int tl, int window, const int* run) {
  return kb + BK - 1 <= t0 && (window == 0 || kb > tl - window) && run[tl] <= kb;
}

template <int HD>
void fwd_fast(const AttnShape& s, const float* q, const float* k, const float* v,
              const int32_t* seg, float* out, float* lse, const RowInfo& ri) {
  const int H = s.H, S = s.S, G = s.H / s.kv_used, Sp = padded(S);
  const i64 ldq = i64(H) * HD, ldkv = i64(s.kv_stored) * HD;
  const float scale = 1.0f / std::sqrt(float(HD));
  // K^T and padded segment ids are packed once per (b, kv head) into the caller's scratch
  // (slots the per-task code below does not use) and shared by the query heads of the group.
  const size_t ktsz = size_t(HD) * Sp;
  float* Kt_all = cpu::scratch<float>(7, size_t(s.B) * s.kv_used * ktsz);
  int32_t* seg_all = cpu::scratch<int32_t>(7, size_t(s.B) * Sp);
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < s.B; ++b) {
    for (int kvh = 0; kvh < s.kv_used; ++kvh) {
      pack_t<HD>(k + i64(b) * S * ldkv + i64(kvh) * HD, ldkv, S,
                 Kt_all + (size_t(b) * s.kv_used + kvh) * ktsz, Sp);
      if (kvh == 0) pack_seg(seg + size_t(b) * S, S, seg_all + size_t(b) * Sp);
    }
  }
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < H; ++h) {
      const int kvh = h / G;
      const float* Kt = Kt_all + (size_t(b) * s.kv_used + kvh) * ktsz;
      const int32_t* segp = seg_all + size_t(b) * Sp;
      float* Qs = cpu::scratch<float>(1, size_t(BQ) * HD);
      float* Sc = cpu::scratch<float>(2, size_t(BQ) * BK);
      float* O = cpu::scratch<float>(3, size_t(BQ) * HD);
      float m[BQ], alpha[BQ];
      __m512 l[BQ];  // per-lane partial sums of exp; reduced once per query tile
      const float* vb0 = v + i64(b) * S * ldkv + i64(kvh) * HD;
      const int* lo = ri.lo.data() + size_t(b) * S;
      const int* run = ri.run.data() + size_t(b) * S;
      for (int t0 = 0; t0 < S; t0 += BQ) {
        const int nq = std::min(BQ, S - t0), tl = t0 + nq - 1;
        int klo = tl;
        for (int i = 0; i < nq; ++i) klo = std::min(klo, lo[t0 + i]);
        for (int i = 0; i < BQ; ++i) {
          float* qi = Qs + i * HD;
          if (i < nq) {
            const float* src = q + (i64(b) * S + t0 + i) * ldq + i64(h) * HD;
            for (int d = 0; d < HD; ++d) qi[d] = src[d] * scale;
          } else {
            std::fill(qi, qi + HD, 0.0f);
          }
          m[i] = -std::numeric_limits<float>::infinity();
          l[i] = _mm512_setzero_ps();
        }
        std::fill(O, O + BQ * HD, 0.0f);
        for (int kb = klo; kb <= tl; kb += BK) {
          const int nk = std::min(BK, tl + 1 - kb);
          const bool full = block_full(kb, t0, tl, s.window, run);
          scores<HD>(Qs, Kt + kb, Sp, Sc);
          for (int i = 0; i < BQ; ++i) {
            float* row = Sc + i * BK;
            if (i >= nq) {
              std::fill(row, row + BK, 0.0f);
              alpha[i] = 1;
              continue;
            }
            if (!full) mask_row(row, t0 + i, kb, s.window, segp, segp[t0 + i]);
            __m512 mx = _mm512_loadu_ps(row);
            for (int c = 1; c < BK / 16; ++c) mx = _mm512_max_ps(mx, _mm512_loadu_ps(row + 16 * c));
            const float rmax = _mm512_reduce_max_ps(mx);
            if (rmax == -std::numeric_limits<float>::infinity()) {
              std::fill(row, row + BK, 0.0f);
              alpha[i] = 1;
              continue;
            }
            const float mnew = std::max(m[i], rmax);
            alpha[i] = std::exp(m[i] - mnew);
            const __m512 mb = _mm512_set1_ps(mnew);
            __m512 sum = _mm512_setzero_ps();
            for (int c = 0; c < BK / 16; ++c) {
              const __m512 p = cpu::exp512(_mm512_sub_ps(_mm512_loadu_ps(row + 16 * c), mb));
              _mm512_storeu_ps(row + 16 * c, p);
              sum = _mm512_add_ps(sum, p);
            }
            l[i] = _mm512_fmadd_ps(l[i], _mm512_set1_ps(alpha[i]), sum);
            m[i] = mnew;
          }
          accum_rows<HD>(BQ, Sc, BK, 1, nk, vb0 + i64(kb) * ldkv, ldkv, O, HD, alpha);
        }
        for (int i = 0; i < nq; ++i) {
          const int t = t0 + i;
          float* dst = out + (i64(b) * S + t) * ldq + i64(h) * HD;
          const float li = _mm512_reduce_add_ps(l[i]), inv = 1.0f / li;
          for (int d = 0; d < HD; ++d) dst[d] = O[i * HD + d] * inv;
          lse[(i64(b) * H + h) * S + t] = m[i] + std::log(li);
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
      float* Kt = cpu::scratch<float>(0, size_t(HD) * Sp);
      float* Vt = cpu::scratch<float>(1, size_t(HD) * Sp);
      float* Qs = cpu::scratch<float>(2, size_t(BQ) * HD);
      float* dOs = cpu::scratch<float>(3, size_t(BQ) * HD);
      float* P = cpu::scratch<float>(4, size_t(BQ) * BK);
      float* dS = cpu::scratch<float>(5, size_t(BQ) * BK);
      float* dQ = cpu::scratch<float>(6, size_t(BQ) * HD);
      int32_t* segp = cpu::scratch<int32_t>(0, size_t(Sp));
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
              float D = 0;
              for (int d = 0; d < HD; ++d) {
                qi[d] = q[o + d] * scale;
                doi[d] = dout[o + d];
                D += dout[o + d] * out[o + d];
              }
              Dv[i] = D;
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
            scores<HD>(Qs, Kt + kb, Sp, P);
            scores<HD>(dOs, Vt + kb, Sp, dS);
            for (int i = 0; i < nq; ++i) {
              float *pr = P + i * BK, *dr = dS + i * BK;
              if (!full) mask_row(pr, t0 + i, kb, s.window, segp, segp[t0 + i]);
              const __m512 lb = _mm512_set1_ps(Lv[i]), db = _mm512_set1_ps(Dv[i]);
              for (int c = 0; c < BK / 16; ++c) {
                const __m512 p = cpu::exp512(_mm512_sub_ps(_mm512_loadu_ps(pr + 16 * c), lb));
                _mm512_storeu_ps(pr + 16 * c, p);
                const __m512 dsv =
                    _mm512_mul_ps(p, _mm512_sub_ps(_mm512_loadu_ps(dr + 16 * c), db));
                _mm512_storeu_ps(dr + 16 * c, dsv);
              }
            }
            // dV[kb+j] += sum_i P[i][j] dO[i];  dK[kb+j] += sum_i dS[i][j] Qs[i]
            accum_rows<HD>(nk, P, 1, BK, nq, dOs, HD, dvb0 + i64(kb) * ldkv, ldkv, nullptr);
            accum_rows<HD>(nk, dS, 1, BK, nq, Qs, HD, dkb0 + i64(kb) * ldkv, ldkv, nullptr);
            // dQ[i] += sum_j dS[i][j] K[kb+j]   (times scale below)
            accum_rows<HD>(nq, dS, BK, 1, nk, kb0 + i64(kb) * ldkv, ldkv, dQ, HD, nullptr);
          }
          for (int i = 0; i < nq; ++i) {
            float* dst = dq + (i64(b) * S + t0 + i) * ldq + i64(h) * HD;
            for (int d = 0; d < HD; ++d) dst[d] = dQ[i * HD + d] * scale;
          }
        }
      }
    }
  }
}
#endif  // __AVX512F__

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

#ifdef __AVX512F__
template <>
bool try_fast_fwd<float>(const AttnShape& s, const float* q, const float* k, const float* v,
                         const int32_t* seg, float* out, float* lse, const RowInfo& ri) {
  switch (s.hd) {
    case 16:
      fwd_fast<16>(s, q, k, v, seg, out, lse, ri);
      return true;
    case 32:
      fwd_fast<32>(s, q, k, v, seg, out, lse, ri);
      return true;
    case 64:
      fwd_fast<64>(s, q, k, v, seg, out, lse, ri);
      return true;
    case 128:
      fwd_fast<128>(s, q, k, v, seg, out, lse, ri);
      return true;
    default:
      return false;
  }
}
template <>
bool try_fast_bwd<float>(const AttnShape& s, const float* q, const float* k, const float* v,
                         const int32_t* seg, const float* out, const float* lse, const float* dout,
                         float* dq, float* dk, float* dv, const RowInfo& ri) {
  switch (s.hd) {
    case 16:
      bwd_fast<16>(s, q, k, v, seg, out, lse, dout, dq, dk, dv, ri);
      return true;
    case 32:
      bwd_fast<32>(s, q, k, v, seg, out, lse, dout, dq, dk, dv, ri);
      return true;
    case 64:
      bwd_fast<64>(s, q, k, v, seg, out, lse, dout, dq, dk, dv, ri);
      return true;
    case 128:
      bwd_fast<128>(s, q, k, v, seg, out, lse, dout, dq, dk, dv, ri);
      return true;
    default:
      return false;
  }
}
#endif

}  // namespace

template <class T>
void attention_fwd(const AttnShape& s, const T* q, const T* k, const T* v, const int32_t* seg,
                   T* out, T* lse) {
  const RowInfo ri = row_info(s, seg);
  if (!try_fast_fwd<T>(s, q, k, v, seg, out, lse, ri)) fwd_generic(s, q, k, v, seg, out, lse, ri);
}

template <class T>
void attention_bwd(const AttnShape& s, const T* q, const T* k, const T* v, const int32_t* seg,
                   const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv) {
  const RowInfo ri = row_info(s, seg);
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
