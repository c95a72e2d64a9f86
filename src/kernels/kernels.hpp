#pragma once
// The one interface between the model and the math. The model calls these and never touches
// BLAS, oneDNN or intrinsics itself; a CUDA backend is a new folder behind the same names.
// Every kernel is instantiated for float (training) and double (finite-difference checks).
//
// Conventions: row-major; weights are [in, out] and applied as y = x @ W; `rows` counts tokens;
// backward functions *overwrite* input gradients (dx) and *accumulate* into weight gradients (dw).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace marin::kernels {

using i64 = int64_t;

// ---- compute dtype of the float GEMMs (cpu/gemm.cpp) ----
// fp32: sgemm (oneDNN or OpenBLAS, gemm_library()). bf16: both inputs converted to bf16 (to_bf16;
// a weight read from its WeightCopy, below) and multiplied by oneDNN's matmul with fp32
// accumulation and an fp32 result; needs a CPU oneDNN
// runs bf16 matmul on (avx512_bf16; oneDNN 2.6 refuses AVX2). bf16_emulated: both inputs rounded to
// bf16 values (round_to_bf16) and multiplied by sgemm: bf16's numerics on any CPU, slower than fp32
// (the rounding pass), for tests. A product of two bf16 values is exact in fp32, so the emulation
// and the hardware differ only in the order of the fp32 sums.
enum class Dtype { fp32, bf16, bf16_emulated };
// Whether a GEMM follows the compute dtype (the model's linear layers) or stays fp32 (router
// logits, recipe §2; Newton–Schulz unless asked otherwise).
enum class Precision { compute, fp32 };
const char* dtype_name(Dtype d);  // "fp32", "bf16", "bf16-emulated"
// The dtype of `name` (one of dtype_name's); marin::Error otherwise.
Dtype parse_dtype(const std::string& name);
// The compute dtype of every Precision::compute float GEMM in this process (default fp32). Set by
// the command that runs a model (train, bench, eval, sample, score) from its --dtype.
void set_compute_dtype(Dtype d);
Dtype compute_dtype();
// The compute dtype `d` for one scope (a trainer's step, validation or evaluation), the previous
// one after it: two models of one process (a test's, a ladder's rungs) never run in each
// other's dtype.
class DtypeScope {
 public:
  explicit DtypeScope(Dtype d) : previous_(compute_dtype()) { set_compute_dtype(d); }
  ~DtypeScope() { set_compute_dtype(previous_); }
  DtypeScope(const DtypeScope&) = delete;
  DtypeScope& operator=(const DtypeScope&) = delete;

 private:
  Dtype previous_;
};
// What a --dtype request ("auto", "fp32", "bf16", "bf16-emulated") computes in on this CPU.
// auto: bf16 where bf16_gemm_supported() (avx512_bf16), else fp32 (docs/kernels.md,
// "Compute dtype"). bf16 where oneDNN's start-up check fails: fp32, with `message` the one line
// saying why (a request is never refused, a run never fails for it).
// Everything else: as asked. The --dtype help of every command that has it (train's option table
// and the CLI's DtypeOption).
inline constexpr const char* kDtypeHelp =
    "GEMM and attention-product inputs in: auto (bf16 where the CPU has avx512_bf16, else fp32), "
    "fp32, bf16 (oneDNN GEMMs and attention's products, fp32 accumulation; fp32 with a message "
    "where it cannot run) or bf16-emulated (bf16 rounding in the fp32 GEMMs, any CPU; attention "
    "stays fp32); weights, optimizer state, norms, softmax, loss and router logits stay fp32";
struct DtypeChoice {
  Dtype dtype = Dtype::fp32;
  std::string message;  // empty unless the request fell back
};
DtypeChoice resolve_dtype(const std::string& requested);
// Whether oneDNN's bf16 matmul runs on this CPU: created once per process on a small product and
// checked against the emulation; `why` (if given) says why not.
bool bf16_gemm_supported(std::string* why = nullptr);

// ---- the library of the fp32 GEMMs (cpu/gemm.cpp) ----
// oneDNN's sgemm JIT-compiles for the CPU at hand (AVX-512 where it has it) whatever OpenBLAS's
// core type is; OpenBLAS runs the kernels of the core it detects or is told (OPENBLAS_CORETYPE,
// which some environments set to Haswell: AVX2 on an AVX-512 CPU). Measured per shape in
// docs/benchmarks.md: oneDNN 1.6-2.0x OpenBLAS-Haswell on every cpu-small product of a Zen 5.
// The choice is fixed for the process (never by timing: two processes of one run, a resume or
// another rank, must compute the same bits): MARIN_GEMM=openblas|onednn, else onednn. double
// stays on OpenBLAS; so does fp32 syrk, except where OpenBLAS runs below the CPU's width (an
// AVX-512 CPU told a non-AVX-512 core): there it is oneDNN's full product, mirrored.
enum class GemmLibrary { onednn, openblas };
const char* gemm_library_name(GemmLibrary g);  // "onednn", "openblas"
GemmLibrary gemm_library();                    // read once from MARIN_GEMM

// ---- dense linear algebra (cpu/gemm.cpp: oneDNN or OpenBLAS; oneDNN for bf16) ----
// C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C, op = transpose when ta / tb. Float GEMMs
// with Precision::compute run in compute_dtype(); double always runs in double.
template <class T>
void gemm(bool ta, bool tb, i64 M, i64 N, i64 K, T alpha, const T* A, i64 lda, const T* B, i64 ldb,
          T beta, T* C, i64 ldc, Precision p = Precision::compute);

// A bf16 (or emulated) product converts each input not held by a weight copy into the calling
// thread's scratch, which is kept for the next product. An input larger than this — the LM
// head's logit gradient, 1,024 × 8,192 in cpu-small: 16 MiB, as A of dX and again as B of dW —
// is converted and multiplied a slice of C at a time, so that scratch stays this small.
inline constexpr int64_t kConversionLimitBytes = int64_t(4) << 20;
// The bytes of converted inputs the calling thread holds (tests; oneDNN's scratchpad aside).
size_t conversion_scratch_bytes();

// C[n,n] = alpha · op(A) op(A)ᵀ + beta · C with op(A) = A[n,k] (trans false) or Aᵀ of A[k,n]
// (trans true): a symmetric product at half a GEMM's work (one triangle computed, then
// mirrored, so all of C is written; with beta ≠ 0, C must be symmetric). Always in T's own
// precision, never bf16: Newton–Schulz's X·Xᵀ and A·A.
template <class T>
void syrk(bool trans, i64 n, i64 k, T alpha, const T* A, i64 lda, T beta, T* C, i64 ldc);
// The lower triangle of C[n,n] (leading dimension ldc) := the transpose of its upper one, which
// is read only (cpu/mirror.cpp: 4 × 4 blocks through registers for float).
template <class T>
void mirror_upper(T* C, i64 n, i64 ldc);

// ---- bf16 conversion (cpu/bf16.cpp), bit for bit the hardware's (vcvtneps2bf16) ----
// Round to nearest, ties to even; ±Inf kept; NaN kept (sign, top mantissa bits, quiet bit set);
// zero and denormals → a zero of the same sign (the conversion treats denormals as zero).
void to_bf16(const float* x, uint16_t* y, i64 n);
// y = the float value of to_bf16(x) (may alias x): the inputs of the emulated bf16 GEMM.
void round_to_bf16(const float* x, float* y, i64 n);
// The same over `rows` rows of `cols` elements, `ld` apart in x, packed in y.
void to_bf16_rows(const float* x, i64 rows, i64 cols, i64 ld, uint16_t* y);
void round_to_bf16_rows(const float* x, i64 rows, i64 cols, i64 ld, float* y);
void from_bf16(const uint16_t* x, float* y, i64 n);  // exact
// y[N] = alpha · x[K] @ W[K,N] + beta · y (W row k at W + k·ldw; beta = 0: y is not read), x and
// W bf16, products and sums in fp32, each column summed over k in order: the same bits on
// every target and thread count (cpu/gemv_bf16.cpp). The bf16 GEMM of one row.
void gemv_bf16(i64 N, i64 K, float alpha, const uint16_t* x, const uint16_t* W, i64 ldw, float beta,
               float* y);

// ---- a bf16 copy of the weights (cpu/weight_copy.cpp) ----
// The bf16 GEMMs convert both inputs at every call, so a weight read by many products (the
// forward and backward of every micro-batch of a step, every decoded token) was converted as
// many times. A WeightCopy covers one fp32 buffer (a model's parameters): refresh() converts all
// of it in the compute dtype of that moment (bf16 values for bf16, bf16-rounded floats for
// bf16-emulated, nothing for fp32), and from then on every GEMM in that dtype whose input lies
// wholly inside the buffer reads the copy at the same offsets and strides instead of converting
// the input: the same values, so the same bits. The owner calls refresh() whenever the buffer may
// have changed before its next product (Model: at every forward() unless the batch says its
// weights are the last forward's, and at the first token a decoder runs). Registered for the
// GEMMs from construction to destruction; the buffer must not move meanwhile. On oneDNN's bf16
// matmul a weight is read in the blocked layout the library asks for (reordered from the copy
// at its first product after a refresh): a weight in its plain layout is re-packed at every
// call. In bf16 the plain copy of the whole buffer is made only by refresh_for_decoding(): a
// decoded token's one-row products (gemv) read it. A training step and a batched forward
// refresh() without it (cpu-small: 40 MB less), their layouts converted from the buffer at the
// weight's first product, and a one-row product among them (an expert block of one row)
// converts its weight at the call; the owner does not change the buffer before its products.
// refresh(begin, end) converts its range at once.
namespace cpu {
struct WeightCopies;
}
class WeightCopy {
 public:
  WeightCopy(const float* data, i64 n);
  ~WeightCopy();
  WeightCopy(const WeightCopy&) = delete;
  WeightCopy& operator=(const WeightCopy&) = delete;
  void refresh();
  // refresh(), and in bf16 the plain copy made now (Model::decode at a sequence's first token).
  void refresh_for_decoding();
  // refresh() of the values [begin, end) only: fully sharded parameters (--shard-params) convert
  // each run of the table when it is gathered, and no product reads the rest of the copy before
  // its own run is refreshed.
  void refresh(i64 begin, i64 end);
  // The memory it holds now: the copy and the blocked layouts made so far.
  i64 bytes() const;
  // Bounds of bytes() for the memory a model admits before it allocates (Model::admitted_params,
  // `marin plan`): the copy of n values in dtype d (bf16: 2 bytes a value, bf16-emulated: 4,
  // fp32: none), and one blocked layout of a bf16 matrix [rows, cols], padded to oneDNN's blocks
  // (measured on AVX-512: rows to 32 and cols to 64 — a 64 × 16 matrix takes 8 KiB, not 2 — and
  // bounded here by 64 × 64). A model's GEMMs read a weight matrix in at most two layouts, the
  // forward's W and the backward's Wᵀ.
  static constexpr i64 copy_bytes(Dtype d, i64 n) {
    return d == Dtype::bf16 ? 2 * n : d == Dtype::bf16_emulated ? 4 * n : 0;
  }
  static constexpr i64 layout_bytes_bound(i64 rows, i64 cols) {
    return 2 * ((rows + 63) / 64 * 64) * ((cols + 63) / 64 * 64);
  }

 private:
  friend struct cpu::WeightCopies;  // the GEMMs' look-up (cpu/weight_copy.hpp)
  struct Layouts;                   // the copy in the GEMM library's own layouts, made on first use
  // Frees the copies of dtypes other than d and sizes the one of d.
  void switch_to(Dtype d);
  void convert(i64 begin, i64 end);
  const float* data_;
  i64 n_;
  Dtype dtype_ = Dtype::fp32;  // of the last refresh(); fp32: no copy
  uint64_t refreshes_ = 0;     // the blocked layouts made since the last refresh are current
  void refresh_all(bool plain);
  // bf16_ holds the buffer as of the last refresh when plain_fresh_ (after a range refresh: each
  // range as of its own, the gated protocol above). Both change under the copies' list lock only.
  std::vector<uint16_t> bf16_;
  bool plain_fresh_ = false;
  std::vector<float> rounded_;
  std::unique_ptr<Layouts> layouts_;
};

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
// inverse = true applies the transpose rotation (the backward pass). pos0: the position of the
// row's first token (incremental decoding runs one token at a time at its own position).
template <class T>
void rope(T* x, int B, int S, int nheads, int hd, i64 row_stride, int rope_dim, double theta,
          bool inverse, i64 pos0 = 0);

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
// The float kernels compute their products (QKᵀ, P·V and the backward's five) as bf16 dot
// products with fp32 accumulation when compute_dtype() is Dtype::bf16 and this is true: the CPU
// has avx512_bf16 and the kernels run on an AVX-512 target (not under MARIN_ISA=avx2), for head
// dimensions 16, 32, 64 and 128 (cpu/attention_bf16.cpp). Softmax, log-sum-exp and every sum
// stay fp32. fp32 and bf16-emulated compute dtypes leave attention in fp32.
bool attention_bf16_supported();

// ---- XSA and the head gate (cpu/xsa.cpp), recipe §2 attention steps 8–9 ----
// Per token t and query head h, with v the value of the KV head h reads (h / group):
//   yx = y − (y·v)/(‖v‖² + eps)·v,  sig = σ(gate logit) (in place),  yg = 2·sig·yx.
struct XsaShape {
  i64 rows = 0;       // tokens
  i64 H = 1, hd = 1;  // query heads, head dim; y/yx/yg rows are H·hd
  i64 group = 1;      // query heads per KV head
  i64 v_stride = 1;   // elements between consecutive tokens' value rows
  double eps = 1e-6;
};
template <class T>
void xsa_gate_fwd(const XsaShape& s, const T* y, const T* v, T* sig, T* yx, T* yg);
// From dyg: dy (overwritten), dgl = d(gate logits) (overwritten) and dv (accumulated).
template <class T>
void xsa_gate_bwd(const XsaShape& s, const T* dyg, const T* y, const T* v, const T* yx,
                  const T* sig, T* dy, T* dv, T* dgl);

// ---- incremental decoding (cpu/decode.cpp): one token at position pos ----
// Softmax attention of one query token over a KV cache that holds row j % cap for position j
// (a ring of the window on local layers, every position on global ones). q, out: [H, hd];
// kc, vc: [cap, kv_used, hd]. Keys pos − window < j <= pos are visible (window 0: all j <= pos).
struct DecodeAttnShape {
  int H = 1, kv_used = 1, hd = 1, window = 0;
  i64 cap = 1;
};
template <class T>
void attention_decode(const DecodeAttnShape& s, const T* q, const T* kc, const T* vc, i64 pos,
                      T* out);
// SConv of the token at position pos: y = Σ_{j<k} w_j·x_{pos−j}, the earlier inputs read from
// `taps` (k−1 rows of C, row (pos − j) % (k−1), none before position 0); then x replaces the
// row of pos − (k−1). Equal to sconv_fwd at that position of a one-document row.
template <class T>
void sconv_step(const T* x, const T* w, T* taps, T* y, i64 pos, int C, int k);

// ---- vectors (cpu/vector_ops.cpp) ----
template <class T>
void add(const T* a, const T* b, T* out, i64 n);  // out = a + b (may alias a or b)
template <class T>
void scale(T* x, T a, i64 n);  // x *= a
template <class T>
void copy(const T* x, T* y, i64 n);  // y = x (no overlap), split over the compute threads
template <class T>
void zero(T* x, i64 n);  // x = 0, split over the compute threads
// out[i] = table[ids[i]] (rows of d); backward: dtable[ids[i]] += dout[i], in row order.
template <class T>
void embedding_fwd(const T* table, const int32_t* ids, T* out, i64 rows, i64 d);
template <class T>
void embedding_bwd(const T* dout, const int32_t* ids, T* dtable, i64 rows, i64 d);

// ---- the exact gradient sum's arithmetic (cpu/fixed_point.cpp; parallel::ExactSum) ----
// Bit for bit the scalar definitions on every ISA. max |x_i|, or +Inf when any x_i is NaN or ±Inf.
float max_abs(const float* x, i64 n);
// acc[i] = Σ_p llrint(double(xs[p][i]) · scale) over the np arrays (0 when np = 0); `scale` is a
// power of two small enough that no sum overflows.
void fixed_point_sum(const float* const* xs, int np, i64 n, double scale, int64_t* acc);
// out[i] = float(double(acc[i]) · inv).
void fixed_point_to_float(const int64_t* acc, i64 n, double inv, float* out);

// ---- instruction set (cpu/dispatch.cpp) ----
// The float kernels are compiled for several Highway targets and run on the best one this CPU
// supports, chosen at the first call: "avx512", "avx2", "emu128" (the portable baseline), ...
std::string isa_name();
// Every target this binary was compiled for that this CPU supports, best first.
std::vector<std::string> isa_targets();
// Tests: run the float kernels on `name` (one of isa_targets()); "" restores the best one.
void force_isa(const std::string& name);
// MARIN_ISA, when set, pins the kernels' target for this process (force_isa), to compare targets
// on one machine; unset, the best one the CPU supports runs. The CLI and the benchmarks call it.
void force_isa_from_env();

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
