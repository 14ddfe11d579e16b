// SGD and Adam update kernels: each element's expressions are written exactly
// as in core/train/optimizer.cc (same operands, same order).
#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/warp_reduce.cuh"

namespace lockstep {
namespace cuda {
namespace {

// ClipGradients' scale: float(clipnorm / norm) above the norm, else 1 (x *
// 1.0f is x, bit for bit).
__device__ inline float ClipScale(const GradientClip& c) {
  if (c.sum_squares == nullptr) return 1.0f;
  const double norm = sqrt(*c.sum_squares);
  return norm > c.clipnorm ? static_cast<float>(c.clipnorm / norm) : 1.0f;
}

__global__ void SgdKernel(int64_t n, SgdStep s, float* w, float* m,
                          const float* g) {
  const float scale = ClipScale(s.clip);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float wi = w[i];
    if (s.decay) wi -= wi * s.decay_factor;
    const float gi = g[i] * scale;
    if (m == nullptr) {
      wi -= gi * s.lr;
    } else if (s.nesterov) {
      const float gl = gi * s.lr;
      const float mi = m[i] * s.momentum - gl;
      m[i] = mi;
      wi += mi * s.momentum - gl;
    } else {
      const float mi = m[i] * s.momentum - gi * s.lr;
      m[i] = mi;
      wi += mi;
    }
    w[i] = wi;
  }
}

__global__ void AdamKernel(int64_t n, AdamStep s, float* w, float* m, float* v,
                           const float* g) {
  const float scale = ClipScale(s.clip);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
       i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float wi = w[i];
    if (s.decay) wi -= wi * s.decay_factor;
    const float gi = g[i] * scale;
    const float mi = m[i] + (gi - m[i]) * s.one_minus_b1;
    const float vi = v[i] + (gi * gi - v[i]) * s.one_minus_b2;
    m[i] = mi;
    v[i] = vi;
    wi -= (mi * s.alpha) / (sqrtf(vi) + s.eps);
    w[i] = wi;
  }
}

// One block's share of sum(g[i]^2): a grid-stride sum per thread, then the
// block's fixed tree.
__global__ void SumSquaresKernel(int64_t n, const float* g, double* partials) {
  __shared__ double shared[kThreads / kWarp];
  double part = 0;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    part += static_cast<double>(g[i]) * g[i];
  }
  part = BlockSum(part, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = part;
}

__global__ void SumPartialsKernel(int64_t count, const double* partials,
                                  double* out) {
  __shared__ double shared[kThreads / kWarp];
  double part = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) part += partials[i];
  part = BlockSum(part, shared);
  if (threadIdx.x == 0) *out = part;
}

}  // namespace

cudaError_t SumSquaresPartials(int64_t n, const float* g, double* partials,
                               cudaStream_t stream) {
  SumSquaresKernel<<<kNormBlocks, kThreads, 0, stream>>>(n, g, partials);
  return cudaGetLastError();
}

cudaError_t SumPartials(int64_t count, const double* partials, double* out,
                        cudaStream_t stream) {
  SumPartialsKernel<<<1, kThreads, 0, stream>>>(count, partials, out);
  return cudaGetLastError();
}

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
