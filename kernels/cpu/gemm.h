// Row-major single-precision GEMM over OpenBLAS: the one place the CPU
// kernels call BLAS.
#ifndef LOCKSTEP_KERNELS_CPU_GEMM_H_
#define LOCKSTEP_KERNELS_CPU_GEMM_H_

#include <cstdint>

namespace lockstep {

// C = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is m x k (A is
// stored k x m when trans_a), op(B) is k x n (stored n x k when trans_b), C is
// m x n. beta == 0 overwrites C (its old contents may be garbage). lda, ldb,
// ldc are the row strides of the stored matrices.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
          float beta, float* c, int64_t ldc);

// Same with tightly packed matrices.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, const float* b, float beta, float* c);

// What a GEMM's inputs are rounded to before they are multiplied: kFp32
// not at all; kBf16 to bfloat16 (round to nearest, ties to even;
// RoundToBf16), the products and their sums in float32. That is a
// bfloat16 matrix unit's arithmetic (the product of two bfloat16 values is
// exact in float32) and torch.autocast's for matmuls and convolutions,
// whose C stays float32 here. A job's "precision" (core/job/job_spec.h).
enum class GemmPrecision { kFp32, kBf16 };

// The two above at `precision`; kFp32 is exactly them.
void Gemm(GemmPrecision precision, bool trans_a, bool trans_b, int64_t m,
          int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void Gemm(GemmPrecision precision, bool trans_a, bool trans_b, int64_t m,
          int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_GEMM_H_
