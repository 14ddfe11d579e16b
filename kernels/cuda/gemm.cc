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

absl::StatusOr<CublasHandle> CublasHandle::Create(CachingAllocator* scratch) {
  cublasHandle_t handle = nullptr;
  absl::Status status = CUBLAS_STATUS(cublasCreate(&handle));
  if (!status.ok()) {
    cudaGetLastError();  // cuBLAS may leave the runtime's error set
    return status;
  }
  return CublasHandle(handle, scratch);
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      allocator_(std::exchange(other.allocator_, nullptr)),
      scratch_(std::exchange(other.scratch_, nullptr)),
      scratch_bytes_(std::exchange(other.scratch_bytes_, 0)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cublasDestroy(handle_);
    FreeScratch().IgnoreError();
    handle_ = std::exchange(other.handle_, nullptr);
    allocator_ = std::exchange(other.allocator_, nullptr);
    scratch_ = std::exchange(other.scratch_, nullptr);
    scratch_bytes_ = std::exchange(other.scratch_bytes_, 0);
  }
  return *this;
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
  FreeScratch().IgnoreError();
}

absl::Status CublasHandle::FreeScratch() const {
  if (scratch_ == nullptr) return absl::OkStatus();
  void* block = std::exchange(scratch_, nullptr);
  scratch_bytes_ = 0;
  return allocator_->Free(block);
}

absl::StatusOr<uint16_t*> CublasHandle::Scratch(int64_t count,
                                                cudaStream_t stream) const {
  if (allocator_ == nullptr) {
    return absl::FailedPreconditionError(
        "cuda::Gemm: 16-bit inputs need the cuBLAS handle's scratch "
        "allocator (the handle was created without one)");
  }
  const size_t bytes = std::max<int64_t>(count, 1) * sizeof(uint16_t);
  if (bytes > scratch_bytes_) {
    const size_t grown = std::max(bytes, scratch_bytes_ / 2 * 3);
    absl::Status freed = FreeScratch();
    if (!freed.ok()) return freed;
    absl::StatusOr<void*> block = allocator_->Allocate(grown, stream);
    if (!block.ok()) return block.status();
    scratch_ = *block;
    scratch_bytes_ = grown;
  }
  return static_cast<uint16_t*>(scratch_);
}

namespace {

// A row-major operand as cuBLAS reads it: `batch` matrices of rows x cols,
// row stride ld, `stride` elements apart (0: the same matrix each time).
struct Operand {
  const void* data;
  int64_t rows, cols, ld, stride;
};

// What cuBLAS multiplies: the float32 operands, or their 16-bit copies.
struct Operands {
  Operand a, b;
  cudaDataType_t type;
  cublasComputeType_t compute;
};

// The elements Convert writes for `x`.
int64_t PackedSize(const Operand& x, int64_t batch) {
  return (x.stride == 0 ? 1 : batch) * x.rows * x.cols;
}

// Packs `x` converted to 16 bits at `y` (row stride cols, rows * cols a
// matrix; one matrix for a stride of 0), and points `x` there.
cudaError_t Convert(InputRounding to, int64_t batch, Operand* x, uint16_t* y,
                    cudaStream_t stream) {
  const cudaError_t e = ToSixteenBits(
      to, x->stride == 0 ? 1 : batch, x->rows, x->cols,
      static_cast<const float*>(x->data), x->ld, x->stride, y, stream);
  x->data = y;
  x->ld = x->cols;
  x->stride = x->stride == 0 ? 0 : x->rows * x->cols;
  return e;
}

absl::StatusOr<Operands> Prepare(const CublasHandle& handle,
                                 cudaStream_t stream,
                                 const GemmOptions& options, int64_t batch,
                                 Operand a, Operand b) {
  if (options.inputs == InputRounding::kNone) {
    return Operands{
        a, b, CUDA_R_32F,
        options.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
  }
  // B 256 bytes aligned after A (tensor cores want 16).
  const int64_t b_at = (PackedSize(a, batch) + 127) / 128 * 128;
  absl::StatusOr<uint16_t*> scratch =
      handle.Scratch(b_at + PackedSize(b, batch), stream);
  if (!scratch.ok()) return scratch.status();
  CUDA_RETURN_IF_ERROR(Convert(options.inputs, batch, &a, *scratch, stream));
  CUDA_RETURN_IF_ERROR(
      Convert(options.inputs, batch, &b, *scratch + b_at, stream));
  return Operands{
      a, b, options.inputs == InputRounding::kBf16 ? CUDA_R_16BF : CUDA_R_16F,
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
      handle, stream, options, 1, {a, trans_a ? k : m, trans_a ? m : k, lda, 0},
      {b, trans_b ? n : k, trans_b ? k : n, ldb, 0});
  if (!o.ok()) return o.status();
  return CUBLAS_STATUS(
      cublasGemmEx(handle.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, in, im, ik, &alpha,
                   o->b.data, o->type, static_cast<int>(o->b.ld), o->a.data,
                   o->type, static_cast<int>(o->a.ld), &beta, c, CUDA_R_32F,
                   ildc, o->compute, CUBLAS_GEMM_DEFAULT));
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
  // 16-bit copies are packed: their row strides and strides change.
  absl::StatusOr<Operands> o =
      Prepare(handle, stream, options, batch,
              {a, trans_a ? k : m, trans_a ? m : k, lda, stride_a},
              {b, trans_b ? n : k, trans_b ? k : n, ldb, stride_b});
  if (!o.ok()) return o.status();
  // Row-major as column-major transposed: A and B swap, as in Gemm.
  return CUBLAS_STATUS(cublasGemmStridedBatchedEx(
      handle.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
      static_cast<int>(m), static_cast<int>(k), &alpha, o->b.data, o->type,
      static_cast<int>(o->b.ld), o->b.stride, o->a.data, o->type,
      static_cast<int>(o->a.ld), o->a.stride, &beta, c, CUDA_R_32F,
      static_cast<int>(ldc), stride_c, static_cast<int>(batch), o->compute,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace cuda
}  // namespace lockstep
