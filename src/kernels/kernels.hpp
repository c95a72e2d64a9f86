#pragma once
// The one interface between the model and the math. The model calls these and never touches
// BLAS, oneDNN or intrinsics itself; a CUDA backend is a new folder behind the same names.
// Every kernel is instantiated for float (training) and double (finite-difference checks).
//
// Conventions: row-major; weights are [in, out] and applied as y = x @ W; `rows` counts tokens;
// backward functions *overwrite* input gradients (dx) and *accumulate* into weight gradients (dw).
#include <cstdint>
#include <string>
#include <vector>

namespace marin::kernels {

using i64 = int64_t;

// ---- dense linear algebra (cpu/gemm.cpp: OpenBLAS) ----
// C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C, op = transpose when ta / tb.
template <class T>
void gemm(bool ta, bool tb, i64 M, i64 N, i64 K, T alpha, const T* A, i64 lda, const T* B, i64 ldb,
          T beta, T* C, i64 ldc);

// ---- normalisation (cpu/norm.cpp) ----
// y = x / sqrt(mean(x^2) + eps) * g   (g == nullptr: no gain). rstd[rows] is saved for backward.
template <class T>
void rmsnorm_fwd(const T* x, const T* g, T* y, T* rstd, i64 rows, i64 dim, double eps);
// dx overwritten; dg (if g and dg non-null) accumulated.
template <class T>
void rmsnorm_bwd(const T* dy, const T* x, const T* g, const T* rstd, T* dx, T* dg, i64 rows,
                 i64 dim);

// ---- element-wise (cpu/elementwise.cpp) ----
// h = silu(a) * b over n elements.
template <class T>
void swiglu_fwd(const T* a, const T* b, T* h, i64 n);
template <class T>
void swiglu_bwd(const T* dh, const T* a, const T* b, T* da, T* db, i64 n);

// ---- depthwise causal conv with document-aware taps (cpu/sconv.cpp) ----
// x, y: [B, S, C]; w: [k, C]; seg: [B, S] segment ids.
// y[b,t,c] = sum_{j<k} w[j,c] * x[b,t-j,c], tap j>=1 zero when t-j < 0 or seg[b,t-j] != seg[b,t].
template <class T>
void sconv_fwd(const T* x, const T* w, const int32_t* seg, T* y, int B, int S, int C, int k);
template <class T>
void sconv_bwd(const T* dy, const T* x, const T* w, const int32_t* seg, T* dx, T* dw, int B, int S,
               int C, int k);

// ---- half-RoPE, interleaved pairs, in place (cpu/rope.cpp) ----
// x: [B, S, nheads, hd] with `row_stride` elements between consecutive tokens. Rotates the first
// rope_dim dims of every head by angle p * theta^(-2i/rope_dim), p = position in the row.
// inverse = true applies the transpose rotation (the backward pass).
template <class T>
void rope(T* x, int B, int S, int nheads, int hd, i64 row_stride, int rope_dim, double theta,
          bool inverse);

// ---- softmax cross-entropy with z-loss (cpu/xent.cpp) ----
// logits: [rows, V]. Writes lse[rows] and ce[rows] = lse - logit[label].
template <class T>
void xent_fwd(const T* logits, const int32_t* labels, T* lse, T* ce, i64 rows, i64 V);
// dlogits = ce_scale * (softmax - onehot) + z_scale * 2 * lse * softmax. May alias logits.
template <class T>
void xent_bwd(const T* logits, const int32_t* labels, const T* lse, T* dlogits, i64 rows, i64 V,
              T ce_scale, T z_scale);

// ---- attention (cpu/attention.cpp): tiled, online softmax, never materialises S x S ----
struct AttnShape {
  int B = 1, S = 1;   // rows, tokens per row
  int H = 1;          // query heads; q/out row: H*hd contiguous per token
  int kv_used = 1;    // KV heads used; query head h reads KV head h / (H / kv_used)
  int kv_stored = 1;  // KV heads stored; k/v row: kv_stored*hd per token
  int hd = 1;         // head dim
  int window = 0;     // 0: full causal. >0: key j visible from t iff t - window < j <= t
};
// Softmax(q k^T / sqrt(hd)) v with the causal / window mask and segment ids (keys of another
// document are invisible). q, out: [B, S, H, hd]; k, v: [B, S, kv_stored, hd]; seg: [B, S];
// lse: [B, H, S] (log-sum-exp of the scaled scores, saved for backward).
template <class T>
void attention_fwd(const AttnShape& s, const T* q, const T* k, const T* v, const int32_t* seg,
                   T* out, T* lse);
// Overwrites dq [B,S,H,hd], dk and dv [B,S,kv_stored,hd] (zero for unused stored heads).
template <class T>
void attention_bwd(const AttnShape& s, const T* q, const T* k, const T* v, const int32_t* seg,
                   const T* out, const T* lse, const T* dout, T* dq, T* dk, T* dv);

// ---- instruction set (cpu/dispatch.cpp) ----
// The float kernels are compiled for several Highway targets and run on the best one this CPU
// supports, chosen at the first call: "avx512", "avx2", "emu128" (the portable baseline), ...
std::string isa_name();
// Every target this binary was compiled for that this CPU supports, best first.
std::vector<std::string> isa_targets();
// Tests: run the float kernels on `name` (one of isa_targets()); "" restores the best one.
void force_isa(const std::string& name);

// The FMA peak of this machine with `threads` threads (0: all), measured for `seconds`
// (kernels/cpu/peak.cpp): the ceiling every "fraction of peak" is judged against. The fp32 loop
// runs on the dispatched target; the bf16 one (vdpbf16ps) gives gflops = 0 without avx512_bf16.
struct PeakResult {
  int threads = 0, lanes = 0;  // vector width in elements (fp32: 8 on AVX2, 16 on AVX-512)
  double gflops = 0;
};
PeakResult measure_fma_peak(int threads, double seconds = 0.3);
PeakResult measure_bf16_peak(int threads, double seconds = 0.3);
bool cpu_has_avx512_bf16();

}  // namespace marin::kernels
