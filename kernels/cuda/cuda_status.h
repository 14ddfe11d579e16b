// The one place CUDA runtime, cuBLAS, cuDNN and NCCL return codes become
// absl::Status (STYLE rule 2), with the call's text and file:line:
//   "cudaMalloc(&p, 4096) at kernels/cuda/allocator.cc:42: out of memory
//    (cudaErrorMemoryAllocation)".
// Codes say what to do: kResourceExhausted (out of memory; free and retry),
// kFailedPrecondition (no usable device or driver; do not retry),
// kInvalidArgument (a bug in the caller), kUnavailable (a transient or
// peer-side system failure; retry), kAborted (a remote rank failed; restart
// the step), kInternal (the device or library is broken; for a sticky CUDA
// error the process must restart).
#ifndef LOCKSTEP_KERNELS_CUDA_CUDA_STATUS_H_
#define LOCKSTEP_KERNELS_CUDA_CUDA_STATUS_H_

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn_graph.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep {
namespace cuda {

// The status code each library's result maps to (kOk for success).
absl::StatusCode CudaErrorCode(cudaError_t err);
absl::StatusCode CublasErrorCode(cublasStatus_t status);
absl::StatusCode CudnnErrorCode(cudnnStatus_t status);
absl::StatusCode NcclErrorCode(ncclResult_t result);

// True for the CUDA errors that leave the context unusable (illegal address,
// launch failure...): every later call in the process fails too.
bool IsStickyCudaError(cudaError_t err);

// OK for success; otherwise "<call> at <file>:<line>: <description> (<name>)"
// with the mapped code. `call` and `file` are usually #expr and __FILE__.
absl::Status CudaStatus(cudaError_t err, absl::string_view call,
                        absl::string_view file, int line);
absl::Status CublasStatus(cublasStatus_t status, absl::string_view call,
                          absl::string_view file, int line);
absl::Status CudnnStatus(cudnnStatus_t status, absl::string_view call,
                         absl::string_view file, int line);
// Adds NCCL's own last-error text (ncclGetLastError(comm); comm may be null)
// when there is one: it names the peer or socket that failed.
absl::Status NcclStatus(ncclResult_t result, absl::string_view call,
                        absl::string_view file, int line,
                        ncclComm_t comm = nullptr);

}  // namespace cuda
}  // namespace lockstep

// The status of one call, e.g. `absl::Status s = CUDA_STATUS(cudaFree(p));`.
#define CUDA_STATUS(expr) \
  ::lockstep::cuda::CudaStatus((expr), #expr, __FILE__, __LINE__)
#define CUBLAS_STATUS(expr) \
  ::lockstep::cuda::CublasStatus((expr), #expr, __FILE__, __LINE__)
#define CUDNN_STATUS(expr) \
  ::lockstep::cuda::CudnnStatus((expr), #expr, __FILE__, __LINE__)
#define NCCL_STATUS(expr) \
  ::lockstep::cuda::NcclStatus((expr), #expr, __FILE__, __LINE__)

// Return the converted status from the enclosing function on failure.
#define LOCKSTEP_CUDA_RETURN_IF_ERROR_(status_expr)                \
  do {                                                             \
    const ::absl::Status _lockstep_cuda_status = (status_expr);    \
    if (!_lockstep_cuda_status.ok()) return _lockstep_cuda_status; \
  } while (0)
#define CUDA_RETURN_IF_ERROR(expr) \
  LOCKSTEP_CUDA_RETURN_IF_ERROR_(CUDA_STATUS(expr))
#define CUBLAS_RETURN_IF_ERROR(expr) \
  LOCKSTEP_CUDA_RETURN_IF_ERROR_(CUBLAS_STATUS(expr))
#define CUDNN_RETURN_IF_ERROR(expr) \
  LOCKSTEP_CUDA_RETURN_IF_ERROR_(CUDNN_STATUS(expr))
#define NCCL_RETURN_IF_ERROR(expr) \
  LOCKSTEP_CUDA_RETURN_IF_ERROR_(NCCL_STATUS(expr))

#endif  // LOCKSTEP_KERNELS_CUDA_CUDA_STATUS_H_
