// The smallest kernel there is, kept to prove that the nvcc rule
// (third_party/cuda.bzl) compiles, links and launches on a given machine.
#ifndef LOCKSTEP_KERNELS_CUDA_BUILD_CHECK_H_
#define LOCKSTEP_KERNELS_CUDA_BUILD_CHECK_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lockstep {
namespace cuda {

// Enqueues x[i] = value for i < n on `stream` (device memory); returns the
// launch error. Does not block.
cudaError_t LaunchFill(float* x, int64_t n, float value, cudaStream_t stream);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_BUILD_CHECK_H_
