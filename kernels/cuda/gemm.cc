// cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T, i.e. the same call with A and B swapped and the
// transposes kept.
#include "kernels/cuda/gemm.h"

#include <cublas_v2.h>

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_status.h"

namespace lockstep {
namespace cuda {

absl::StatusOr<CublasHandle> CublasHandle::Create() {
  cublasHandle_t handle = nullptr;
  absl::Status status = CUBLAS_STATUS(cublasCreate(&handle));
  if (!status.ok()) {
    cudaGetLastError();  // cuBLAS may leave the runtime's error set
    return status;
  }
  return CublasHandle(handle);
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

cublasComputeType_t ComputeType(const GemmOptions& options) {
  switch (options.inputs) {
    case InputRounding::kBf16:
      return CUBLAS_COMPUTE_32F_FAST_16BF;
    case InputRounding::kFp16:
      return CUBLAS_COMPUTE_32F_FAST_16F;
    case InputRounding::kNone:
      break;
  }
  return options.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

absl::Status Gemm(const CublasHandle& handle, cudaStream_t stream,
                  const GemmOptions& options, bool trans_a, bool trans_b,
                  int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta,
                  float* c, int64_t ldc) {
  if (handle.get() == nullptr) {
    return absl::FailedPreconditionError("cuda::Gemm: no cuBLAS handle");
  }
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m < 0 || n < 0 || k < 0 || m > kMax || n > kMax || k > kMax ||
      lda > kMax || ldb > kMax || ldc > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda::Gemm: bad sizes m=", m, " n=", n, " k=", k,
                     " lda=", lda, " ldb=", ldb, " ldc=", ldc));
  }
  if (m == 0 || n == 0) return absl::OkStatus();
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(handle.get(), stream));
  const int im = static_cast<int>(m), in = static_cast<int>(n),
            ik = static_cast<int>(k), ildc = static_cast<int>(ldc);
  if (k == 0) {
    // No products: C = beta * C, as the CPU Gemm (BLAS libraries disagree).
    if (beta == 0.0f) {
      return CUDA_STATUS(cudaMemset2DAsync(c, ldc * sizeof(float), 0,
                                           n * sizeof(float), m, stream));
    }
    const float zero = 0.0f;
    return CUBLAS_STATUS(cublasSgeam(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, in,
                                     im, &beta, c, ildc, &zero, c, ildc, c,
                                     ildc));
  }
  const cublasComputeType_t compute = ComputeType(options);
  return CUBLAS_STATUS(cublasGemmEx(
      handle.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, in, im, ik, &alpha, b, CUDA_R_32F,
      static_cast<int>(ldb), a, CUDA_R_32F, static_cast<int>(lda), &beta, c,
      CUDA_R_32F, ildc, compute, CUBLAS_GEMM_DEFAULT));
}

absl::Status GemmStridedBatched(const CublasHandle& handle, cudaStream_t stream,
                                const GemmOptions& options, bool trans_a,
                                bool trans_b, int64_t m, int64_t n, int64_t k,
                                float alpha, const float* a, int64_t lda,
                                int64_t stride_a, const float* b, int64_t ldb,
                                int64_t stride_b, float beta, float* c,
                                int64_t ldc, int64_t stride_c, int64_t batch) {
  if (handle.get() == nullptr) {
    return absl::FailedPreconditionError(
        "cuda::GemmStridedBatched: no cuBLAS handle");
  }
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m < 0 || n < 0 || k < 0 || m > kMax || n > kMax || k > kMax ||
      lda > kMax || ldb > kMax || ldc > kMax || batch < 0 || batch > kMax ||
      stride_a < 0 || stride_b < 0 || stride_c < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda::GemmStridedBatched: bad sizes m=", m, " n=", n, " k=", k,
        " lda=", lda, " ldb=", ldb, " ldc=", ldc, " strides=", stride_a, ",",
        stride_b, ",", stride_c, " batch=", batch));
  }
  if (m == 0 || n == 0 || batch == 0) return absl::OkStatus();
  if (k == 0) {
    // Gemm's own k == 0 rule (C = beta * C), one matrix at a time: rare.
    for (int64_t i = 0; i < batch; ++i) {
      absl::Status s = Gemm(handle, stream, options, trans_a, trans_b, m, n, 0,
                            alpha, a, lda, b, ldb, beta, c + i * stride_c, ldc);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  CUBLAS_RETURN_IF_ERROR(cublasSetStream(handle.get(), stream));
  const cublasComputeType_t compute = ComputeType(options);
  // Row-major as column-major transposed: A and B swap, as in Gemm.
  return CUBLAS_STATUS(cublasGemmStridedBatchedEx(
      handle.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
      static_cast<int>(m), static_cast<int>(k), &alpha, b, CUDA_R_32F,
      static_cast<int>(ldb), stride_b, a, CUDA_R_32F, static_cast<int>(lda),
      stride_a, &beta, c, CUDA_R_32F, static_cast<int>(ldc), stride_c,
      static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace cuda
}  // namespace lockstep
