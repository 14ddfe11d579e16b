// SGD and Adam update kernels: each element's expressions are written exactly
// as in core/train/optimizer.cc (same operands, same order).
#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/grid_stride.cuh"

namespace lockstep {
namespace cuda {
namespace {

__global__ void SgdKernel(int64_t n, SgdStep s, float* w, float* m,
                          const float* g) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float wi = w[i];
    if (s.decay) wi -= wi * s.decay_factor;
    if (m == nullptr) {
      wi -= g[i] * s.lr;
    } else if (s.nesterov) {
      const float gl = g[i] * s.lr;
      const float mi = m[i] * s.momentum - gl;
      m[i] = mi;
      wi += mi * s.momentum - gl;
    } else {
      const float mi = m[i] * s.momentum - g[i] * s.lr;
      m[i] = mi;
      wi += mi;
    }
    w[i] = wi;
  }
}

__global__ void AdamKernel(int64_t n, AdamStep s, float* w, float* m, float* v,
                           const float* g) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float wi = w[i];
    if (s.decay) wi -= wi * s.decay_factor;
    const float gi = g[i];
    const float mi = m[i] + (gi - m[i]) * s.one_minus_b1;
    const float vi = v[i] + (gi * gi - v[i]) * s.one_minus_b2;
    m[i] = mi;
    v[i] = vi;
    wi -= (mi * s.alpha) / (sqrtf(vi) + s.eps);
    w[i] = wi;
  }
}

}  // namespace

cudaError_t SgdUpdate(int64_t n, const SgdStep& step, float* w, float* m,
                      const float* g, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SgdKernel<<<Blocks(n), kThreads, 0, stream>>>(n, step, w, m, g);
  return cudaGetLastError();
}

cudaError_t AdamUpdate(int64_t n, const AdamStep& step, float* w, float* m,
                       float* v, const float* g, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AdamKernel<<<Blocks(n), kThreads, 0, stream>>>(n, step, w, m, v, g);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
