// Element-wise glue between the model's modules: residual adds, scaling, the embedding gather and
// its scatter-add backward. Memory-bound loops that the compiler vectorises; the embedding
// backward adds rows in token order, so repeated ids sum in a fixed order.
#include <algorithm>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

namespace marin::kernels {

template <class T>
void add(const T* a, const T* b, T* out, i64 n) {
  cpu::for_blocks(n, [&](i64 b0, i64 len) {
#pragma omp simd
    for (i64 i = b0; i < b0 + len; ++i) out[i] = a[i] + b[i];
  });
}

template <class T>
void scale(T* x, T a, i64 n) {
  cpu::for_blocks(n, [&](i64 b0, i64 len) {
#pragma omp simd
    for (i64 i = b0; i < b0 + len; ++i) x[i] *= a;
  });
}

// A large copy (the update guard's snapshot of the parameters and optimizer state, 240 MB a
// cpu-small step) in blocks over the threads: one thread's memcpy left the other idle.
template <class T>
void copy(const T* x, T* y, i64 n) {
  cpu::for_blocks(n, [&](i64 b0, i64 len) { std::copy(x + b0, x + b0 + len, y + b0); });
}

// The gradient buffer before each backward (120 MB a cpu-small micro-batch): like copy, the
// threads share what one memset did alone.
template <class T>
void zero(T* x, i64 n) {
  cpu::for_blocks(n, [&](i64 b0, i64 len) { std::fill(x + b0, x + b0 + len, T(0)); });
}

template <class T>
void embedding_fwd(const T* table, const int32_t* ids, T* out, i64 rows, i64 d) {
  cpu::parallel_for(rows, rows * d >= cpu::kParallelMin, [&](i64 i) {
    std::copy(table + ids[i] * d, table + (ids[i] + 1) * d, out + i * d);
  });
}

template <class T>
void embedding_bwd(const T* dout, const int32_t* ids, T* dtable, i64 rows, i64 d) {
  for (i64 i = 0; i < rows; ++i) {
    const T* g = dout + i * d;
    T* dst = dtable + i64(ids[i]) * d;
#pragma omp simd
    for (i64 j = 0; j < d; ++j) dst[j] += g[j];
  }
}

#define MARIN_VECTOR_OPS(T)                                               \
  template void add<T>(const T*, const T*, T*, i64);                      \
  template void scale<T>(T*, T, i64);                                     \
  template void copy<T>(const T*, T*, i64);                               \
  template void zero<T>(T*, i64);                                         \
  template void embedding_fwd<T>(const T*, const int32_t*, T*, i64, i64); \
  template void embedding_bwd<T>(const T*, const int32_t*, T*, i64, i64);
MARIN_VECTOR_OPS(float)
MARIN_VECTOR_OPS(double)
#undef MARIN_VECTOR_OPS

}  // namespace marin::kernels
