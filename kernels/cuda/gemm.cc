// cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T, i.e. the same call with A and B swapped and the
// transposes kept.
#include "kernels/cuda/gemm.h"

#include <cublas_v2.h>

#include <algorithm>
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
    : handle_(std::exchange(other.handle_, nullptr)),
      scratch_(std::exchange(other.scratch_, nullptr)),
      scratch_bytes_(std::exchange(other.scratch_bytes_, 0)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cublasDestroy(handle_);
    if (scratch_ != nullptr) cudaFree(scratch_);
    handle_ = std::exchange(other.handle_, nullptr);
    scratch_ = std::exchange(other.scratch_, nullptr);
    scratch_bytes_ = std::exchange(other.scratch_bytes_, 0);
  }
  return *this;
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
  if (scratch_ != nullptr) cudaFree(scratch_);
}

absl::StatusOr<uint16_t*> CublasHandle::Scratch(int64_t count,
                                                cudaStream_t stream) const {
  const size_t bytes = std::max<int64_t>(count, 1) * sizeof(uint16_t);
  if (bytes > scratch_bytes_) {
    const size_t grown = std::max(bytes, scratch_bytes_ / 2 * 3);
    // Earlier calls on the stream may still read the old memory.
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    if (scratch_ != nullptr) CUDA_RETURN_IF_ERROR(cudaFree(scratch_));
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    CUDA_RETURN_IF_ERROR(cudaMalloc(&scratch_, grown));
    scratch_bytes_ = grown;
  }
  return static_cast<uint16_t*>(scratch_);
}

namespace {

// The elements a row-major matrix of `rows` x `cols` with row stride `ld`
// spans, `batch` of them `stride` apart.
int64_t Span(int64_t rows, int64_t cols, int64_t ld, int64_t batch = 1,
             int64_t stride = 0) {
  return (batch - 1) * stride + (rows - 1) * ld + cols;
}

// What cuBLAS multiplies: the float32 operands, or their 16-bit copies.
struct Operands {
  const void* a;
  const void* b;
  cudaDataType_t type;
  cublasComputeType_t compute;
};

absl::StatusOr<Operands> Prepare(const CublasHandle& handle,
                                 cudaStream_t stream,
                                 const GemmOptions& options, const float* a,
                                 int64_t span_a, const float* b,
                                 int64_t span_b) {
  if (options.inputs == InputRounding::kNone) {
    return Operands{
        a, b, CUDA_R_32F,
        options.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
  }
  // B 256 bytes aligned after A (tensor cores want 16).
  const int64_t b_at = (span_a + 127) / 128 * 128;
  absl::StatusOr<uint16_t*> scratch = handle.Scratch(b_at + span_b, stream);
  if (!scratch.ok()) return scratch.status();
  uint16_t* a16 = *scratch;
  uint16_t* b16 = *scratch + b_at;
  CUDA_RETURN_IF_ERROR(ToSixteenBits(options.inputs, span_a, a, a16, stream));
  CUDA_RETURN_IF_ERROR(ToSixteenBits(options.inputs, span_b, b, b16, stream));
  return Operands{
      a16, b16,
      options.inputs == InputRounding::kBf16 ? CUDA_R_16BF : CUDA_R_16F,
      CUBLAS_COMPUTE_32F};
}

}  // namespace

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
  absl::StatusOr<Operands> o = Prepare(
      handle, stream, options, a, Span(trans_a ? k : m, trans_a ? m : k, lda),
      b, Span(trans_b ? n : k, trans_b ? k : n, ldb));
  if (!o.ok()) return o.status();
  return CUBLAS_STATUS(cublasGemmEx(
      handle.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, in, im, ik, &alpha, o->b, o->type,
      static_cast<int>(ldb), o->a, o->type, static_cast<int>(lda), &beta, c,
      CUDA_R_32F, ildc, o->compute, CUBLAS_GEMM_DEFAULT));
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
  // 16-bit copies keep the layout (strides, a stride of 0 included).
  absl::StatusOr<Operands> o =
      Prepare(handle, stream, options, a,
              Span(trans_a ? k : m, trans_a ? m : k, lda, batch, stride_a), b,
              Span(trans_b ? n : k, trans_b ? k : n, ldb, batch, stride_b));
  if (!o.ok()) return o.status();
  // Row-major as column-major transposed: A and B swap, as in Gemm.
  return CUBLAS_STATUS(cublasGemmStridedBatchedEx(
      handle.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
      static_cast<int>(m), static_cast<int>(k), &alpha, o->b, o->type,
      static_cast<int>(ldb), stride_b, o->a, o->type, static_cast<int>(lda),
      stride_a, &beta, c, CUDA_R_32F, static_cast<int>(ldc), stride_c,
      static_cast<int>(batch), o->compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace cuda
}  // namespace lockstep
