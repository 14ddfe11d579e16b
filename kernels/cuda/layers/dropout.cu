// Inverted dropout with kernels/cpu/dropout_mask.h's mask.
#include "kernels/cuda/layers/dropout.h"
#include "kernels/cpu/dropout_mask.h"
#include "kernels/cuda/grid_stride.cuh"

namespace lockstep {
namespace cuda {
namespace {


__global__ void ApplyKernel(int64_t n, float rate, float scale, uint64_t seed,
                            const float* in, float* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // A blend, as the CPU's: a dropped negative value is -0 on both.
    out[i] = in[i] * (DropoutKeep(seed, i, rate) ? scale : 0.0f);
  }
}

cudaError_t Apply(int64_t n, float rate, uint64_t seed, const float* in,
                  float* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const float scale = 1.0f / (1.0f - rate);  // on the host, as the CPU
  ApplyKernel<<<Blocks(n), kThreads, 0, stream>>>(n, rate, scale, seed, in,
                                                  out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t DropoutForward(int64_t n, float rate, uint64_t seed, const float* x,
                           float* y, cudaStream_t stream) {
  return Apply(n, rate, seed, x, y, stream);
}

cudaError_t DropoutBackward(int64_t n, float rate, uint64_t seed,
                            const float* dy, float* dx, cudaStream_t stream) {
  return Apply(n, rate, seed, dy, dx, stream);
}

}  // namespace cuda
}  // namespace lockstep
