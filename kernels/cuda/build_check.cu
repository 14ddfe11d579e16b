// LaunchFill: a grid-stride fill, the build rule's smoke test.
#include "kernels/cuda/build_check.h"

namespace lockstep {
namespace cuda {
namespace {

__global__ void FillKernel(float* x, int64_t n, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = value;
  }
}

}  // namespace

cudaError_t LaunchFill(float* x, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  FillKernel<<<static_cast<int>(blocks < 4096 ? blocks : 4096), threads, 0,
               stream>>>(x, n, value);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
