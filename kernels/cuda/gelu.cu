// GELU element-wise kernels (grid-stride).
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/grid_stride.cuh"

namespace lockstep {
namespace cuda {
namespace {

constexpr float kInvSqrt2 = 0.70710678f;
constexpr float kInvSqrt2Pi = 0.39894228f;

__global__ void ForwardKernel(int64_t n, const float* x, float* y) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * kInvSqrt2));
  }
}

__global__ void BackwardKernel(int64_t n, const float* x, const float* dy,
                               float* dx) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const float v = x[i];
    const float phi = 0.5f * (1.0f + erff(v * kInvSqrt2));
    dx[i] = dy[i] * (phi + v * kInvSqrt2Pi * expf(-0.5f * v * v));
  }
}

}  // namespace

cudaError_t GeluForward(int64_t n, const float* x, float* y,
                        cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(n, x, y);
  return cudaGetLastError();
}

cudaError_t GeluBackward(int64_t n, const float* x, const float* dy, float* dx,
                         cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  BackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(n, x, dy, dx);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
