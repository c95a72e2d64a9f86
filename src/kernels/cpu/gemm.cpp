// GEMM on oneDNN's sgemm or OpenBLAS (OpenMP build; kernels.hpp, "the library of the fp32
// GEMMs"), and in bf16 on oneDNN's matmul. Row-major wrappers so the model reads like the math.
// On OpenBLAS a single fp32 row goes to its gemv: OpenBLAS 0.3.21's gemm packs the whole of B
// even for M = 1, which doubles the memory traffic of a decoding step (the LM head alone is 8 MB
// in cpu-small). oneDNN's sgemm needs no such help (M = 1 measured 1.05-1.6x OpenBLAS's gemv).
//
// The compute dtype (kernels.hpp) is one process-wide setting, read by every Precision::compute
// float GEMM: the commands set it once from --dtype before any model runs.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "kernels/cpu/weight_copy.hpp"
#include "kernels/kernels.hpp"
#include "kernels/threads.hpp"

namespace marin::kernels {

namespace {

std::atomic<Dtype> g_dtype{Dtype::fp32};

void sgemm(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, i64 lda,
           const float* B, i64 ldb, float beta, float* C, i64 ldc) {
  if (gemm_library() == GemmLibrary::onednn) {
    // Row-major, like the cblas call; oneDNN's dnnl_sgemm returns a status, never throws.
    const dnnl_status_t st =
        dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st != dnnl_success)
      fail("oneDNN sgemm {}x{}x{} (lda {}, ldb {}, ldc {}) failed with status {}", M, N, K, lda,
           ldb, ldc, int(st));
    return;
  }
  if (M == 1 && K > 0 && !ta) {  // one row (a decoding step, a one-row expert block): a gemv
    cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? N : K, tb ? K : N, alpha, B,
                ldb, A, 1, beta, C, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// Scratch of the calling thread (converted inputs, oneDNN scratchpads); grows, never shrinks.
template <class T>
std::vector<T>* thread_scratch_buffers() {
  thread_local std::vector<T> bufs[2];
  return bufs;
}
template <class T>
T* thread_scratch(int which, size_t n) {
  std::vector<T>& buf = thread_scratch_buffers<T>()[which];
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// op(A) is stored as a rows x cols matrix with leading dimension ld: rows = ta ? K : M.
struct Stored {
  i64 rows, cols;
  i64 extent(i64 ld) const { return (rows - 1) * ld + cols; }  // the floats it spans
};

// An input of a bf16 GEMM as the product reads it (E: uint16_t bf16 values, or bf16-rounded
// floats for the emulation): the weight copy where one holds it, at its own strides, else
// converted into the calling thread's scratch buffer `slot`, packed.
template <class E>
struct Bf16Input {
  const E* p;
  i64 ld;
};
template <class E>
Bf16Input<E> bf16_input(const float* x, Stored s, i64 ld, int slot) {
  constexpr Dtype d = std::is_same_v<E, uint16_t> ? Dtype::bf16 : Dtype::bf16_emulated;
  if (const void* copy = cpu::WeightCopies::find(x, s.extent(ld), d))
    return {static_cast<const E*>(copy), ld};
  E* y = thread_scratch<E>(slot, size_t(s.rows * s.cols));
  if constexpr (d == Dtype::bf16)
    to_bf16_rows(x, s.rows, s.cols, ld, y);
  else
    round_to_bf16_rows(x, s.rows, s.cols, ld, y);
  return {y, s.cols};
}

// B as the product reads it. Where B is A itself (the same matrix at the same strides:
// Newton–Schulz's X·Xᵀ and A·A in the compute dtype), A's conversion serves both: one pass
// instead of two, the same values.
template <class E>
Bf16Input<E> bf16_input_b(const float* B, Stored sb, i64 ldb, const float* A, Stored sa, i64 lda,
                          Bf16Input<E> a) {
  if (B == A && ldb == lda && sb.rows == sa.rows && sb.cols == sa.cols) return a;
  return bf16_input<E>(B, sb, ldb, 1);
}

// The emulation: inputs rounded to bf16 values, then the fp32 GEMM.
void gemm_emulated(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, i64 lda,
                   const float* B, i64 ldb, float beta, float* C, i64 ldc) {
  const Stored sa{ta ? K : M, ta ? M : K}, sb{tb ? N : K, tb ? K : N};
  const auto a = bf16_input<float>(A, sa, lda, 0);
  const auto b = bf16_input_b<float>(B, sb, ldb, A, sa, lda, a);
  sgemm(ta, tb, M, N, K, alpha, a.p, a.ld, b.p, b.ld, beta, C, ldc);
}

// ---- oneDNN bf16 matmul ----
// The engine is shared; a stream per thread, as products run concurrently under
// kernels::parallel_tasks (Newton–Schulz of an expert stack) and a stream is not for concurrent
// use.
struct Dnnl {
  dnnl::engine& engine;
  dnnl::stream stream{engine};
};
Dnnl& dnnl_state() {
  static dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  thread_local Dnnl d{engine};
  return d;
}

// A product prepared for one shape: its primitive and the memory objects it runs on, whose data
// handles are set at each call. Creating the primitive descriptor, the primitive (a look-up in
// oneDNN's own cache) and four memory objects at every call cost as much as a one-row product
// itself, and a decoded token of cpu-small makes some 300 of them. Kept per thread (the streams
// are); the many row counts of the experts' products make many shapes, so the table is emptied
// when it grows past kMaxPrepared.
struct Shape {
  bool ta, tb, copied;  // copied: B read from its WeightCopy, in oneDNN's blocked layout
  i64 M, N, K, lda, ldb, ldc;
  float alpha, beta;
  bool operator==(const Shape& o) const {
    return std::tie(ta, tb, copied, M, N, K, lda, ldb, ldc, alpha, beta) ==
           std::tie(o.ta, o.tb, o.copied, o.M, o.N, o.K, o.lda, o.ldb, o.ldc, o.alpha, o.beta);
  }
};
struct ShapeHash {
  size_t operator()(const Shape& s) const {
    size_t h = size_t(s.ta) | size_t(s.tb) << 1 | size_t(s.copied) << 2;
    for (i64 v : {s.M, s.N, s.K, s.lda, s.ldb, s.ldc}) h = h * 1000003u ^ std::hash<i64>()(v);
    return h * 1000003u ^ std::hash<float>()(s.alpha) ^ std::hash<float>()(s.beta) << 1;
  }
};
struct Prepared {
  dnnl::matmul prim;
  // wei: a packed weight's memory; a copied weight is read from its blocked layout instead,
  // whose desc is wei.get_desc().
  dnnl::memory src, wei, dst, pad;
};
constexpr size_t kMaxPrepared = 4096;

Prepared prepare(const Shape& s, Dnnl& d) {
  using md = dnnl::memory::desc;
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // Transposes expressed as strides; a copied weight in the layout oneDNN chooses (format any).
  const md src_md({s.M, s.K}, dt::bf16, s.ta ? dims{1, s.lda} : dims{s.lda, 1});
  const md wei_md = s.copied ? md({s.K, s.N}, dt::bf16, dnnl::memory::format_tag::any)
                             : md({s.K, s.N}, dt::bf16, s.tb ? dims{1, s.ldb} : dims{s.ldb, 1});
  const md dst_md({s.M, s.N}, dt::f32, dims{s.ldc, 1});
  dnnl::primitive_attr attr;
  if (s.alpha != 1.0f) attr.set_output_scales(0, {s.alpha});
  if (s.beta != 0.0f) {
    dnnl::post_ops po;
    po.append_sum(s.beta);
    attr.set_post_ops(po);
  }
  // The scratchpad is ours, reused from call to call: left to the library, oneDNN allocates it
  // afresh at every execution, and the kernel's clearing of those new pages took 23 % of a
  // cpu-small bf16 training step (perf, Zen 5).
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_md, dst_md), attr, d.engine);
  // Memory objects made with no data; each call sets their handles.
  return {dnnl::matmul(pd), dnnl::memory(src_md, d.engine, nullptr),
          dnnl::memory(pd.weights_desc(), d.engine, nullptr),
          dnnl::memory(dst_md, d.engine, nullptr),
          dnnl::memory(pd.scratchpad_desc(), d.engine, nullptr)};
}

// One oneDNN product on this thread's stream, of inputs in bf16 (B in its WeightCopy's blocked
// layout where `copied`, else b) into C.
void matmul_bf16(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, Bf16Input<uint16_t> a,
                 const float* B, bool copied, Bf16Input<uint16_t> b, float beta, float* C,
                 i64 ldc) {
  Dnnl& d = dnnl_state();
  thread_local std::unordered_map<Shape, Prepared, ShapeHash> prepared;
  const Shape shape{ta, tb, copied, M, N, K, a.ld, b.ld, ldc, alpha, beta};
  auto it = prepared.find(shape);
  if (it == prepared.end()) {
    if (prepared.size() >= kMaxPrepared) prepared.clear();
    it = prepared.emplace(shape, prepare(shape, d)).first;
  }
  Prepared& p = it->second;
  // oneDNN's memory objects take non-const handles; the inputs are only read.
  dnnl::memory wei = p.wei;
  if (copied) {
    wei = cpu::WeightCopies::blocked(B, tb, K, N, b.ld, p.wei.get_desc(), d.engine, d.stream);
    MARIN_CHECK(wei, "the bf16 copy of a weight vanished during its product");
  } else {
    wei.set_data_handle(const_cast<uint16_t*>(b.p));
  }
  p.src.set_data_handle(const_cast<uint16_t*>(a.p));
  p.dst.set_data_handle(C);
  p.pad.set_data_handle(thread_scratch<uint8_t>(0, p.pad.get_desc().get_size()));
  p.prim.execute(d.stream, {{DNNL_ARG_SRC, p.src},
                            {DNNL_ARG_WEIGHTS, wei},
                            {DNNL_ARG_DST, p.dst},
                            {DNNL_ARG_SCRATCHPAD, p.pad}});
  d.stream.wait();
}

// How many slices a product of converted inputs runs as, one per thread. oneDNN 2.6 runs a
// product whose output is small beside its depth — a weight gradient Xᵀ·dY over a micro-batch's
// 1,024 rows, 256 × 128 — on one thread at any count, and most of its time goes to repacking the
// transposed X (BM_Gemm on the Zen 5: 185–206 µs in oneDNN at one thread; at two, each of two
// column halves still took 159, each of two row halves 112), so such a product is split here into
// slices of C's rows (each repacks only its own columns of X), at least 16 a slice (oneDNN's
// blocking). Each slice is one single-threaded product (kernels::parallel_tasks).
int row_slices(i64 M, i64 N, i64 K) {
  if (K < 2 * std::max(M, N)) return 1;
  return int(std::clamp<i64>(M / 16, 1, compute_threads()));
}

// Throws dnnl::error where oneDNN has no bf16 matmul for this CPU.
void gemm_dnnl_bf16(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, i64 lda,
                    const float* B, i64 ldb, float beta, float* C, i64 ldc) {
  const Stored sa{ta ? K : M, ta ? M : K}, sb{tb ? N : K, tb ? K : N};
  const auto a = bf16_input<uint16_t>(A, sa, lda, 0);
  if (M == 1 && !tb) {  // one row (a decoded token): our gemv, free of oneDNN's cost a call
    const auto b = bf16_input_b<uint16_t>(B, sb, ldb, A, sa, lda, a);
    gemv_bf16(N, K, alpha, a.p, b.p, b.ld, beta, C);
    return;
  }
  const bool copied = cpu::WeightCopies::covers(B, sb.extent(ldb), Dtype::bf16);
  if (copied) return matmul_bf16(ta, tb, M, N, K, alpha, a, B, true, {nullptr, ldb}, beta, C, ldc);
  const auto b = bf16_input_b<uint16_t>(B, sb, ldb, A, sa, lda, a);
  const int slices = row_slices(M, N, K);
  if (slices == 1) return matmul_bf16(ta, tb, M, N, K, alpha, a, B, false, b, beta, C, ldc);
  const i64 height = (M + slices - 1) / slices;
  parallel_tasks(slices, [&](i64 t, int) {
    const i64 m0 = t * height, m = std::min(height, M - m0);
    if (m <= 0) return;
    const Bf16Input<uint16_t> part{ta ? a.p + m0 : a.p + m0 * a.ld, a.ld};
    matmul_bf16(ta, tb, m, N, K, alpha, part, B, false, b, beta, C + m0 * ldc, ldc);
  });
}

// The bytes input x (stored s, leading dimension ld) is converted into for a product in dtype d
// where that passes kConversionLimitBytes, else 0: also where a weight copy holds it (`blocked`:
// B, which the product may read from its blocked layout). The copies are looked up here only
// for an input that large: a product of smaller ones looks them up once, in the product itself.
i64 converted_bytes_over_limit(const float* x, Stored s, i64 ld, Dtype d, bool blocked) {
  const i64 bytes = s.rows * s.cols * (d == Dtype::bf16 ? 2 : 4);
  if (bytes <= kConversionLimitBytes) return 0;
  const bool held = blocked ? cpu::WeightCopies::covers(x, s.extent(ld), d)
                            : cpu::WeightCopies::find(x, s.extent(ld), d) != nullptr;
  return held ? 0 : bytes;
}

// product (gemm_dnnl_bf16 or gemm_emulated) over slices of C where an input would be converted
// into more than kConversionLimitBytes (kernels.hpp): rows where A would, else columns where B
// would. Every slice has the product's depth K.
template <class Product>
void within_conversion_limit(Dtype d, bool ta, bool tb, i64 M, i64 N, i64 K, float alpha,
                             const float* A, i64 lda, const float* B, i64 ldb, float beta, float* C,
                             i64 ldc, Product product) {
  const Stored sa{ta ? K : M, ta ? M : K}, sb{tb ? N : K, tb ? K : N};
  const auto slices = [](i64 bytes, i64 extent) {
    return std::min(extent, (bytes + kConversionLimitBytes - 1) / kConversionLimitBytes);
  };
  if (const i64 n = slices(converted_bytes_over_limit(A, sa, lda, d, false), M); n > 1) {
    const i64 height = (M + n - 1) / n;
    for (i64 m0 = 0; m0 < M; m0 += height)
      within_conversion_limit(d, ta, tb, std::min(height, M - m0), N, K, alpha,
                              ta ? A + m0 : A + m0 * lda, lda, B, ldb, beta, C + m0 * ldc, ldc,
                              product);
    return;
  }
  if (const i64 n = slices(converted_bytes_over_limit(B, sb, ldb, d, true), N); n > 1) {
    const i64 width = (N + n - 1) / n;
    for (i64 n0 = 0; n0 < N; n0 += width)
      within_conversion_limit(d, ta, tb, M, std::min(width, N - n0), K, alpha, A, lda,
                              tb ? B + n0 * ldb : B + n0, ldb, beta, C + n0, ldc, product);
    return;
  }
  product(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// The start-up check: a small product with both transposes, alpha and beta, against the
// emulation (the same bf16 inputs; only the order of the fp32 sums may differ).
struct Bf16Check {
  bool ok = false;
  std::string why;
};
Bf16Check check_bf16_gemm() {
  Bf16Check r;
  constexpr i64 M = 24, N = 40, K = 56;
  std::vector<float> A(M * K), B(K * N), C0(M * N), C1(M * N);
  for (i64 i = 0; i < M * K; ++i) A[size_t(i)] = std::sin(0.37f * float(i)) * 1.7f;
  for (i64 i = 0; i < K * N; ++i) B[size_t(i)] = std::cos(0.23f * float(i)) - 0.3f;
  for (i64 i = 0; i < M * N; ++i) C0[size_t(i)] = C1[size_t(i)] = 0.01f * float(i % 17);
  try {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const float alpha = t == 3 ? -0.5f : 1.0f, beta = t >= 2 ? 1.0f : 0.0f;
      gemm_dnnl_bf16(ta, tb, M, N, K, alpha, A.data(), ta ? M : K, B.data(), tb ? K : N, beta,
                     C0.data(), N);
      gemm_emulated(ta, tb, M, N, K, alpha, A.data(), ta ? M : K, B.data(), tb ? K : N, beta,
                    C1.data(), N);
      for (i64 i = 0; i < M * N; ++i)
        if (!(std::fabs(C0[size_t(i)] - C1[size_t(i)]) <= 1e-4f * (1 + std::fabs(C1[size_t(i)])))) {
          r.why = fmt::format("oneDNN's bf16 matmul gave {} where the emulation gives {}",
                              C0[size_t(i)], C1[size_t(i)]);
          return r;
        }
    }
  } catch (const dnnl::error& e) {
    r.why =
        fmt::format("oneDNN {}.{} has no bf16 matmul for this CPU{} ({})", DNNL_VERSION_MAJOR,
                    DNNL_VERSION_MINOR, cpu_has_avx512_bf16() ? "" : " (no avx512_bf16)", e.what());
    return r;
  }
  r.ok = true;
  return r;
}

}  // namespace

const char* gemm_library_name(GemmLibrary g) {
  return g == GemmLibrary::onednn ? "onednn" : "openblas";
}

GemmLibrary gemm_library() {
  static const GemmLibrary g = [] {
    const char* v = std::getenv("MARIN_GEMM");
    const std::string name = v ? v : "";
    if (name.empty() || name == "onednn") return GemmLibrary::onednn;
    if (name == "openblas") return GemmLibrary::openblas;
    fail("MARIN_GEMM={}: expected onednn or openblas", name);
  }();
  return g;
}

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::fp32:
      return "fp32";
    case Dtype::bf16:
      return "bf16";
    case Dtype::bf16_emulated:
      return "bf16-emulated";
  }
  return "?";
}

Dtype parse_dtype(const std::string& name) {
  for (Dtype d : {Dtype::fp32, Dtype::bf16, Dtype::bf16_emulated})
    if (name == dtype_name(d)) return d;
  fail("dtype '{}': expected fp32, bf16 or bf16-emulated", name);
}

void set_compute_dtype(Dtype d) {
  std::string why;
  if (d == Dtype::bf16 && !bf16_gemm_supported(&why))
    fail("set_compute_dtype(bf16): {} (resolve_dtype falls back to fp32)", why);
  g_dtype.store(d);
}
Dtype compute_dtype() {
  return g_dtype.load();
}

bool bf16_gemm_supported(std::string* why) {
  static const Bf16Check check = check_bf16_gemm();
  if (why) *why = check.why;
  return check.ok;
}

DtypeChoice resolve_dtype(const std::string& requested) {
  // auto: bf16 where oneDNN's bf16 matmul runs and passes the start-up check (avx512_bf16),
  // fp32 elsewhere, silently: both are what a default run should compute on that CPU (the
  // 200-step cpu-small comparison of docs/benchmarks.md).
  if (requested == "auto") return {bf16_gemm_supported() ? Dtype::bf16 : Dtype::fp32, ""};
  const Dtype d = parse_dtype(requested);
  if (d != Dtype::bf16) return {d, ""};
  std::string why;
  if (bf16_gemm_supported(&why)) return {d, ""};
  return {Dtype::fp32,
          fmt::format("marin: --dtype bf16: {}; computing in fp32 instead (--dtype bf16-emulated "
                      "runs bf16's numerics on any CPU)",
                      why)};
}

size_t conversion_scratch_bytes() {
  size_t b = 0;
  for (int i = 0; i < 2; ++i)
    b += thread_scratch_buffers<uint16_t>()[i].capacity() * sizeof(uint16_t) +
         thread_scratch_buffers<float>()[i].capacity() * sizeof(float);
  return b;
}

template <>
void gemm<float>(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, i64 lda,
                 const float* B, i64 ldb, float beta, float* C, i64 ldc, Precision p) {
  if (M == 0 || N == 0) return;
  profile::add_flops(2.0 * double(M) * double(N) * double(K));
  const Dtype d = p == Precision::fp32 || K == 0 ? Dtype::fp32 : compute_dtype();
  switch (d) {
    case Dtype::fp32:
      sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      return;
    case Dtype::bf16_emulated:
      within_conversion_limit(d, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                              gemm_emulated);
      return;
    case Dtype::bf16:
      within_conversion_limit(d, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                              gemm_dnnl_bf16);
      return;
  }
}

template <>
void gemm<double>(bool ta, bool tb, i64 M, i64 N, i64 K, double alpha, const double* A, i64 lda,
                  const double* B, i64 ldb, double beta, double* C, i64 ldc, Precision) {
  if (M == 0 || N == 0) return;
  profile::add_flops(2.0 * double(M) * double(N) * double(K));
  if (M == 1 && K > 0 && !ta) {  // one row (a decoding step, a one-row expert block): a gemv
    cblas_dgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? N : K, tb ? K : N, alpha, B,
                ldb, A, 1, beta, C, 1);
    return;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}

namespace {
// syrk halves a product's work, but OpenBLAS runs the kernels of the core it is told, and some
// environments tell it Haswell (AVX2) on an AVX-512 CPU: there oneDNN's full product at the
// CPU's width is the faster of the two (Newton–Schulz of 32 experts' 128×128 matrices, one
// Zen 5 thread: syrk 12.6 ms, full products 10.3 ms; even OpenBLAS's AVX-512 syrk takes 10.1).
// The width is oneDNN's effective one, not the CPU's: ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 CPU
// (an AVX2 machine's figures measured on this one, with MARIN_ISA=avx2) keeps syrk, as on
// Zen 3, where it beat the full products. Fixed for the process, like the GEMM library.
bool syrk_as_full_product() {
  static const bool full = [] {
    const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    if (gemm_library() != GemmLibrary::onednn ||
        (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & avx512) != avx512)
      return false;
    const std::string core = openblas_get_corename();
    return core != "SkylakeX" && core != "Cooperlake" && core != "SapphireRapids";
  }();
  return full;
}
}  // namespace

template <class T>
void syrk(bool trans, i64 n, i64 k, T alpha, const T* A, i64 lda, T beta, T* C, i64 ldc) {
  if (n == 0) return;
  const CBLAS_TRANSPOSE t = trans ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    if (syrk_as_full_product()) {
      profile::add_flops(2.0 * double(n) * double(n) * double(k));
      sgemm(trans, !trans, n, n, k, alpha, A, lda, A, lda, beta, C, ldc);
      mirror_upper(C, n, ldc);  // symmetric to the bit, as OpenBLAS's is
      return;
    }
  }
  profile::add_flops(double(n) * double(n + 1) * double(k));  // one triangle
  if constexpr (std::is_same_v<T, float>)
    cblas_ssyrk(CblasRowMajor, CblasUpper, t, n, k, alpha, A, lda, beta, C, ldc);
  else
    cblas_dsyrk(CblasRowMajor, CblasUpper, t, n, k, alpha, A, lda, beta, C, ldc);
  mirror_upper(C, n, ldc);
}
template void syrk<float>(bool, i64, i64, float, const float*, i64, float, float*, i64);
template void syrk<double>(bool, i64, i64, double, const double*, i64, double, double*, i64);

}  // namespace marin::kernels
