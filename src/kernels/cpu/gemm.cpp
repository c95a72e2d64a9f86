// GEMM on OpenBLAS (OpenMP build). Row-major wrappers so the model reads like the math. A single
// row goes to gemv: OpenBLAS 0.3.21's gemm packs the whole of B even for M = 1, which doubles the
// memory traffic of a decoding step (the LM head alone is 8 MB in cpu-small).
#include <cblas.h>

#include "kernels/kernels.hpp"

namespace marin::kernels {

template <>
void gemm<float>(bool ta, bool tb, i64 M, i64 N, i64 K, float alpha, const float* A, i64 lda,
                 const float* B, i64 ldb, float beta, float* C, i64 ldc) {
  if (M == 0 || N == 0) return;
  if (M == 1 && K > 0 && !ta) {  // one row (a decoding step, a one-row expert block): a gemv
    cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? N : K, tb ? K : N, alpha, B,
                ldb, A, 1, beta, C, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <>
void gemm<double>(bool ta, bool tb, i64 M, i64 N, i64 K, double alpha, const double* A, i64 lda,
                  const double* B, i64 ldb, double beta, double* C, i64 ldc) {
  if (M == 0 || N == 0) return;
  if (M == 1 && K > 0 && !ta) {  // one row (a decoding step, a one-row expert block): a gemv
    cblas_dgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? N : K, tb ? K : N, alpha, B,
                ldb, A, 1, beta, C, 1);
    return;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace marin::kernels
