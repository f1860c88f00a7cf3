// Row-major GEMM through OpenBLAS: C = alpha * op(A) * op(B) + beta * C.
#pragma once

#include <cstdint>

namespace collective::frontend {

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// OpenBLAS threads per process. Ranks share the machine's cores, so training uses 1.
void setBlasThreads(int n);

}  // namespace collective::frontend
