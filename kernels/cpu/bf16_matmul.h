// bfloat16 matrix products in hardware: oneDNN's matmul (Debian's
// libdnnl) on CPUs with AVX512-BF16 or AMX, bfloat16 inputs, float32
// products and sums, float32 C. Gemm(GemmPrecision::kBf16, ...)
// (kernels/cpu/gemm.h) uses it where it is available and otherwise
// multiplies the rounded inputs in float32 (the same arithmetic, slower).
#ifndef LOCKSTEP_KERNELS_CPU_BF16_MATMUL_H_
#define LOCKSTEP_KERNELS_CPU_BF16_MATMUL_H_

#include <cstdint>
#include <string>

namespace lockstep {

// True when oneDNN multiplies bfloat16 in this CPU's bfloat16 instructions
// and the process may use it (the environment variable
// LOCKSTEP_BF16_GEMM is not "software"). Decided once, by a probe product.
bool Bf16MatmulAvailable();
// For the job's start line: "oneDNN brg:avx512_core_bf16", or why bf16 is
// converted in software here ("this CPU has no bfloat16 instructions").
std::string Bf16MatmulDescription();

// C = alpha * op(A) op(B) + beta * C on the calling thread, A and B
// row-major bfloat16 (the top halves of float32s) with row strides lda and
// ldb, C float32 (beta == 0: C is overwritten). false when oneDNN refused
// (C untouched); only after Bf16MatmulAvailable() returned true.
bool Bf16Matmul(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                float alpha, const uint16_t* a, int64_t lda, const uint16_t* b,
                int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_BF16_MATMUL_H_
