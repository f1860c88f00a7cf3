#include "blas.hpp"

#include <cblas.h>

#include <climits>

#include "base/error.hpp"

namespace collective::frontend {

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  COLL_CHECK_ARG(m >= 0 && n >= 0 && k >= 0, "gemm: negative size m=", m, " n=", n, " k=", k);
  COLL_CHECK_ARG(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX &&
                     ldc <= INT_MAX,
                 "gemm: size beyond the 32-bit BLAS interface (m=", m, " n=", n, " k=", k, ")");
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void setBlasThreads(int n) { openblas_set_num_threads(n); }

}  // namespace collective::frontend
