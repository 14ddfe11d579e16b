// Code tables and message formatting for the four GPU libraries' results.
#include "kernels/cuda/cuda_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace cuda {
namespace {

using absl::StatusCode;

absl::Status Format(StatusCode code, absl::string_view call,
                    absl::string_view file, int line,
                    absl::string_view description, absl::string_view name,
                    absl::string_view detail = "") {
  std::string message = absl::StrCat(call, " at ", file, ":", line, ": ",
                                     description, " (", name, ")");
  if (!detail.empty()) absl::StrAppend(&message, ": ", detail);
  return absl::Status(code, message);
}

}  // namespace

bool IsStickyCudaError(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

StatusCode CudaErrorCode(cudaError_t err) {
  if (IsStickyCudaError(err)) return StatusCode::kInternal;
  switch (err) {
    case cudaSuccess:
      return StatusCode::kOk;
    case cudaErrorMemoryAllocation:
    case cudaErrorLaunchOutOfResources:
    case cudaErrorTooManyPeers:
    case cudaErrorMpsMaxClientsReached:
    case cudaErrorMpsMaxConnectionsReached:
      return StatusCode::kResourceExhausted;
    // No usable GPU, driver or kernel image: retrying cannot help.
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorNoDevice:
    case cudaErrorStubLibrary:
    case cudaErrorInitializationError:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady:
    case cudaErrorDeviceNotLicensed:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidKernelImage:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorInvalidPtx:
    case cudaErrorJitCompilerNotFound:
    case cudaErrorJitCompilationDisabled:
    case cudaErrorPeerAccessUnsupported:
    case cudaErrorPeerAccessAlreadyEnabled:
    case cudaErrorPeerAccessNotEnabled:
    case cudaErrorNotPermitted:
    case cudaErrorSetOnActiveProcess:
    case cudaErrorContextIsDestroyed:
    case cudaErrorCudartUnloading:
    case cudaErrorIllegalState:
    case cudaErrorDeviceUninitialized:
      return StatusCode::kFailedPrecondition;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidPitchValue:
    case cudaErrorInvalidSymbol:
    case cudaErrorInvalidHostPointer:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDeviceFunction:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidClusterSize:
    case cudaErrorCooperativeLaunchTooLarge:
    case cudaErrorHostMemoryAlreadyRegistered:
    case cudaErrorHostMemoryNotRegistered:
    case cudaErrorMissingConfiguration:
      return StatusCode::kInvalidArgument;
    // Busy or not-yet-ready resources: a later retry may succeed.
    case cudaErrorNotReady:
    case cudaErrorDevicesUnavailable:
    case cudaErrorDeviceAlreadyInUse:
    case cudaErrorMpsConnectionFailed:
    case cudaErrorMpsRpcFailure:
    case cudaErrorMpsServerNotReady:
    case cudaErrorMpsClientTerminated:
      return StatusCode::kUnavailable;
    case cudaErrorTimeout:
      return StatusCode::kDeadlineExceeded;
    case cudaErrorNotSupported:
    case cudaErrorNotYetImplemented:
    case cudaErrorUnsupportedLimit:
    case cudaErrorCdpNotSupported:
    case cudaErrorStreamCaptureUnsupported:
      return StatusCode::kUnimplemented;
    default:
      return StatusCode::kInternal;
  }
}

StatusCode CublasErrorCode(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return StatusCode::kOk;
    case CUBLAS_STATUS_ALLOC_FAILED:
      return StatusCode::kResourceExhausted;
    // cuBLAS reports "no driver / no device" as NOT_INITIALIZED.
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_LICENSE_ERROR:
      return StatusCode::kFailedPrecondition;
    case CUBLAS_STATUS_INVALID_VALUE:
      return StatusCode::kInvalidArgument;
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return StatusCode::kUnimplemented;
    default:  // MAPPING_ERROR, EXECUTION_FAILED, INTERNAL_ERROR
      return StatusCode::kInternal;
  }
}

StatusCode CudnnErrorCode(cudnnStatus_t status) {
  if (status == CUDNN_STATUS_SUCCESS) return StatusCode::kOk;
  switch (status) {  // specific codes first, then the category (x000)
    case CUDNN_STATUS_RUNTIME_IN_PROGRESS:
      return StatusCode::kUnavailable;
    case CUDNN_STATUS_RUNTIME_FP_OVERFLOW:
      return StatusCode::kOutOfRange;
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
    case CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING:
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE:
    case CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER:
      return StatusCode::kFailedPrecondition;
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      return StatusCode::kResourceExhausted;
    default:
      break;
  }
  // cuDNN 9 groups codes by thousands: 1xxx set-up (NOT_INITIALIZED is
  // 1001), 2xxx BAD_PARAM, 3xxx NOT_SUPPORTED, 4xxx INTERNAL, 5xxx EXECUTION.
  switch (CUDNN_STATUS_CATEGORY(static_cast<int>(status))) {
    case 1000:
      return StatusCode::kFailedPrecondition;
    case 2000:
      return StatusCode::kInvalidArgument;
    case 3000:
      return StatusCode::kUnimplemented;
    default:  // INTERNAL_ERROR, EXECUTION_FAILED
      return StatusCode::kInternal;
  }
}

StatusCode NcclErrorCode(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return StatusCode::kOk;
    // A peer died or left: the collective cannot finish; restart the step.
    case ncclRemoteError:
      return StatusCode::kAborted;
    // Sockets, shared memory, /dev/shm: the local system failed, may recover.
    case ncclSystemError:
      return StatusCode::kUnavailable;
    // Non-blocking communicator still initializing: poll again.
    case ncclInProgress:
      return StatusCode::kUnavailable;
    case ncclInvalidArgument:
      return StatusCode::kInvalidArgument;
    case ncclInvalidUsage:
      return StatusCode::kFailedPrecondition;
    default:  // ncclUnhandledCudaError, ncclInternalError
      return StatusCode::kInternal;
  }
}

absl::Status CudaStatus(cudaError_t err, absl::string_view call,
                        absl::string_view file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  std::string description = cudaGetErrorString(err);
  if (IsStickyCudaError(err)) {
    description += "; the CUDA context is unusable, restart the process";
  }
  return Format(CudaErrorCode(err), call, file, line, description,
                cudaGetErrorName(err));
}

absl::Status CublasStatus(cublasStatus_t status, absl::string_view call,
                          absl::string_view file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return Format(CublasErrorCode(status), call, file, line,
                cublasGetStatusString(status), cublasGetStatusName(status));
}

absl::Status CudnnStatus(cudnnStatus_t status, absl::string_view call,
                         absl::string_view file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  // cudnnGetErrorString gives the enumerator's name; the prose, when there
  // is any, is cuDNN's last-error text for this thread.
  char last[512] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  return Format(
      CudnnErrorCode(status), call, file, line, "cuDNN error",
      absl::StrCat(cudnnGetErrorString(status), ", ", static_cast<int>(status)),
      last);
}

namespace {

const char* NcclResultName(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult_t unknown";
  }
}

}  // namespace

absl::Status NcclStatus(ncclResult_t result, absl::string_view call,
                        absl::string_view file, int line, ncclComm_t comm) {
  if (result == ncclSuccess) return absl::OkStatus();
  const char* last = ncclGetLastError(comm);
  return Format(
      NcclErrorCode(result), call, file, line, ncclGetErrorString(result),
      absl::StrCat(NcclResultName(result), ", ", static_cast<int>(result)),
      last != nullptr ? last : "");
}

}  // namespace cuda
}  // namespace lockstep
