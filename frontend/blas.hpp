// Row-major GEMM through OpenBLAS: C = alpha * op(A) * op(B) + beta * C.
#pragma once

#include <cstdint>

namespace collective::frontend {

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// OpenBLAS threads per process. Ranks share the machine's cores, so training uses 1.
void setBlasThreads(int n);

}  // namespace collective::frontend

// Hot elementwise loops of the layers are compiled twice, for AVX2 and for the baseline
// x86-64 (SSE2) the build targets, and the loader picks one per CPU (GCC's ifunc
// target_clones). AVX2 without FMA: the compiler contracts nothing in either clone, so a
// result does not depend on which clone ran (the lane-split sums fix the order).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define FRONTEND_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FRONTEND_VECTOR_CLONES
#endif
