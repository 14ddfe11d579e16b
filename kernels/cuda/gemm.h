// Row-major single-precision GEMM on the GPU through cuBLAS, with the
// contract of kernels/cpu/gemm.h, and the cuBLAS handle that owns its state.
#ifndef LOCKSTEP_KERNELS_CUDA_GEMM_H_
#define LOCKSTEP_KERNELS_CUDA_GEMM_H_

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/elementwise.h"

namespace lockstep {
namespace cuda {

// A cuBLAS handle on the device current at Create, and the device memory
// its 16-bit GEMMs convert their operands into, a block of that device's
// caching allocator; move-only, destroys itself. Not thread-safe: one
// handle per thread (or per stream) that calls Gemm.
class CublasHandle {
 public:
  // `scratch`: the current device's allocator the 16-bit operands' memory
  // comes from (so it counts in its stats, and an out-of-memory empties the
  // cache before it fails); it must outlive the handle. nullptr: 16-bit
  // GEMMs fail with kFailedPrecondition. kFailedPrecondition without a
  // usable GPU or driver.
  static absl::StatusOr<CublasHandle> Create(CachingAllocator* scratch);

  CublasHandle() = default;
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle();

  cublasHandle_t get() const { return handle_; }

  // `count` 16-bit values of device memory, reused by every call on this
  // handle (its calls are ordered on one stream); grown when a call needs
  // more: the old block goes back to the allocator's cache for its stream
  // (work enqueued there that reads it runs before anything that gets it
  // again), so nothing waits.
  absl::StatusOr<uint16_t*> Scratch(int64_t count, cudaStream_t stream) const;

 private:
  CublasHandle(cublasHandle_t handle, CachingAllocator* allocator)
      : handle_(handle), allocator_(allocator) {}
  absl::Status FreeScratch() const;
  cublasHandle_t handle_ = nullptr;
  CachingAllocator* allocator_ = nullptr;  // the scratch's; not owned
  mutable void* scratch_ = nullptr;
  mutable size_t scratch_bytes_ = 0;
};

struct GemmOptions {
  // TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32): inputs rounded to a
  // 10-bit mantissa, FP32 accumulation; several times faster on H100 but
  // about 1e-3 relative error. false: full FP32 (CUBLAS_COMPUTE_32F).
  bool allow_tf32 = false;
  // A job's 16-bit precision: A and B converted to bfloat16 or IEEE half
  // (ToSixteenBits: RoundInputs' rounding, the CPU's for bfloat16) in the
  // handle's scratch memory and multiplied as CUDA_R_16BF / CUDA_R_16F
  // matrices on tensor cores, with float32 products, sums and C
  // (CUBLAS_COMPUTE_32F), as torch.autocast's matmuls but for C; the
  // float32 buffers stay as they are. Takes precedence over allow_tf32.
  InputRounding inputs = InputRounding::kNone;
};

// C = alpha * op(A) * op(B) + beta * C, all row-major device matrices with
// row strides lda, ldb, ldc, exactly as lockstep::Gemm: op(A) is m x k (A
// stored k x m when trans_a), op(B) k x n, C m x n; beta == 0 overwrites C
// (garbage and NaN included); k == 0 gives C = beta * C. Enqueued on
// `stream` (the handle is bound to it); does not block (but when the
// handle's scratch grows, which a 16-bit call may need).
absl::Status Gemm(const CublasHandle& handle, cudaStream_t stream,
                  const GemmOptions& options, bool trans_a, bool trans_b,
                  int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta,
                  float* c, int64_t ldc);

// `batch` independent Gemms in one cuBLAS call: the i-th reads a + i *
// stride_a and b + i * stride_b and writes c + i * stride_c (element
// strides), each with Gemm's contract (row-major, row strides lda, ldb,
// ldc; beta == 0 overwrites; k == 0 gives C = beta * C). The C matrices
// must not overlap. batch == 0 does nothing. Enqueued on `stream`; does not
// block.
absl::Status GemmStridedBatched(const CublasHandle& handle, cudaStream_t stream,
                                const GemmOptions& options, bool trans_a,
                                bool trans_b, int64_t m, int64_t n, int64_t k,
                                float alpha, const float* a, int64_t lda,
                                int64_t stride_a, const float* b, int64_t ldb,
                                int64_t stride_b, float beta, float* c,
                                int64_t ldc, int64_t stride_c, int64_t batch);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_GEMM_H_
