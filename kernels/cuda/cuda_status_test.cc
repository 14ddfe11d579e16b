// The converters on error codes fed by hand: no device needed.
#include "kernels/cuda/cuda_status.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace cuda {
namespace {

using absl::StatusCode;
using ::testing::HasSubstr;

TEST(CudaStatusTest, SuccessIsOk) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "f()", "x.cc", 1).ok());
  EXPECT_TRUE(CublasStatus(CUBLAS_STATUS_SUCCESS, "f()", "x.cc", 1).ok());
  EXPECT_TRUE(CudnnStatus(CUDNN_STATUS_SUCCESS, "f()", "x.cc", 1).ok());
  EXPECT_TRUE(NcclStatus(ncclSuccess, "f()", "x.cc", 1).ok());
}

TEST(CudaStatusTest, MessageNamesCallPlaceAndError) {
  const absl::Status s =
      CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(&p, 4096)",
                 "kernels/cuda/allocator.cc", 42);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "cudaMalloc(&p, 4096) at kernels/cuda/allocator.cc:42: out of "
            "memory (cudaErrorMemoryAllocation)");
}

TEST(CudaStatusTest, CudaCodes) {
  EXPECT_EQ(CudaErrorCode(cudaErrorInsufficientDriver),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorCode(cudaErrorNoDevice), StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorCode(cudaErrorNoKernelImageForDevice),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudaErrorCode(cudaErrorInvalidValue), StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaErrorCode(cudaErrorInvalidDevice),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaErrorCode(cudaErrorLaunchOutOfResources),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaErrorCode(cudaErrorNotReady), StatusCode::kUnavailable);
  EXPECT_EQ(CudaErrorCode(cudaErrorTimeout), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(CudaErrorCode(cudaErrorNotSupported), StatusCode::kUnimplemented);
  EXPECT_EQ(CudaErrorCode(cudaErrorUnknown), StatusCode::kInternal);
}

TEST(CudaStatusTest, InsufficientDriverSaysSo) {
  const absl::Status s =
      CudaStatus(cudaErrorInsufficientDriver, "cudaGetDeviceCount(&n)",
                 "kernels/cuda/device.cc", 7);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("(cudaErrorInsufficientDriver)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("driver"));
}

TEST(CudaStatusTest, StickyErrorsSayRestart) {
  EXPECT_TRUE(IsStickyCudaError(cudaErrorIllegalAddress));
  EXPECT_TRUE(IsStickyCudaError(cudaErrorLaunchFailure));
  EXPECT_FALSE(IsStickyCudaError(cudaErrorMemoryAllocation));
  const absl::Status s = CudaStatus(cudaErrorIllegalAddress,
                                    "cudaStreamSynchronize(s)", "a.cc", 3);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("restart the process"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("(cudaErrorIllegalAddress)"));
}

TEST(CudaStatusTest, CublasCodesAndNames) {
  EXPECT_EQ(CublasErrorCode(CUBLAS_STATUS_ALLOC_FAILED),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(CublasErrorCode(CUBLAS_STATUS_NOT_INITIALIZED),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(CublasErrorCode(CUBLAS_STATUS_INVALID_VALUE),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CublasErrorCode(CUBLAS_STATUS_NOT_SUPPORTED),
            StatusCode::kUnimplemented);
  EXPECT_EQ(CublasErrorCode(CUBLAS_STATUS_EXECUTION_FAILED),
            StatusCode::kInternal);
  const absl::Status s = CublasStatus(CUBLAS_STATUS_INVALID_VALUE,
                                      "cublasSgemm(h, ...)", "g.cc", 9);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("cublasSgemm(h, ...) at g.cc:9: "));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("(CUBLAS_STATUS_INVALID_VALUE)"));
}

TEST(CudaStatusTest, CudnnCodesBySpecificCodeThenCategory) {
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_BAD_PARAM_NULL_POINTER),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_NOT_SUPPORTED_SHAPE),
            StatusCode::kUnimplemented);
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_NOT_INITIALIZED),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      CudnnErrorCode(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED),
      StatusCode::kResourceExhausted);
  EXPECT_EQ(CudnnErrorCode(CUDNN_STATUS_EXECUTION_FAILED),
            StatusCode::kInternal);
  const absl::Status s = CudnnStatus(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
                                     "cudnnConvolutionForward(...)", "c.cc", 5);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("cudnnConvolutionForward(...) at c.cc:5: "));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, 2008"));
}

TEST(CudaStatusTest, NcclCodes) {
  EXPECT_EQ(NcclErrorCode(ncclRemoteError), StatusCode::kAborted);
  EXPECT_EQ(NcclErrorCode(ncclSystemError), StatusCode::kUnavailable);
  EXPECT_EQ(NcclErrorCode(ncclInProgress), StatusCode::kUnavailable);
  EXPECT_EQ(NcclErrorCode(ncclInvalidArgument), StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclErrorCode(ncclInvalidUsage), StatusCode::kFailedPrecondition);
  EXPECT_EQ(NcclErrorCode(ncclUnhandledCudaError), StatusCode::kInternal);
  EXPECT_EQ(NcclErrorCode(ncclInternalError), StatusCode::kInternal);
  const absl::Status s =
      NcclStatus(ncclRemoteError, "ncclAllReduce(...)", "n.cc", 11);
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("ncclAllReduce(...) at n.cc:11: "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("(ncclRemoteError, 6)"));
}

absl::Status FailsAtKnownLine(int* line) {
  *line = __LINE__ + 1;
  CUDA_RETURN_IF_ERROR(cudaErrorInvalidValue);
  return absl::InternalError("not reached");
}

absl::Status PassesThrough() {
  CUBLAS_RETURN_IF_ERROR(CUBLAS_STATUS_SUCCESS);
  CUDNN_RETURN_IF_ERROR(CUDNN_STATUS_SUCCESS);
  NCCL_RETURN_IF_ERROR(ncclSuccess);
  return absl::OkStatus();
}

TEST(CudaStatusTest, MacrosCarryTextFileAndLine) {
  int line = 0;
  const absl::Status s = FailsAtKnownLine(&line);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("cudaErrorInvalidValue at kernels/cuda/"
                        "cuda_status_test.cc:" +
                        std::to_string(line) + ": "));
  EXPECT_TRUE(PassesThrough().ok());
  EXPECT_EQ(CUDA_STATUS(cudaErrorNoDevice).code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace cuda
}  // namespace lockstep
