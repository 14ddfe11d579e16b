// Attention's kernels (see transformer.h): the masked row softmax (one warp
// a row), its dropout from the CPU's mask bits, and the softmax backward.
// Built with --fmad=false, as transformer.cu.
#include "kernels/cpu/dropout_mask.h"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/transformer.h"
#include "kernels/cuda/warp_reduce.cuh"

namespace lockstep {
namespace cuda {
namespace {

constexpr int kRowsPerBlock = kThreads / kWarp;  // one warp per row

__device__ bool KeyAllowed(const float* mask, int64_t j) {
  return mask == nullptr || mask[j] != 0.0f;
}

__global__ void SoftmaxForwardKernel(int64_t rows, int64_t heads,
                                     int64_t length, const float* mask,
                                     AttentionDropout dropout, float keep_scale,
                                     float* probs, float* dropped) {
  const int lane = threadIdx.x % kWarp;
  const int64_t first =
      blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int64_t step = int64_t{gridDim.x} * kRowsPerBlock;
  for (int64_t r = first; r < rows; r += step) {
    // Row r is query r % L of (sample, head) r / L.
    const float* m =
        mask != nullptr ? mask + (r / length / heads) * length : nullptr;
    float* p = probs + r * length;
    float mx = -INFINITY;
    for (int64_t j = lane; j < length; j += kWarp) {
      if (KeyAllowed(m, j)) mx = fmaxf(mx, p[j]);
    }
    mx = WarpMax(mx);
    if (mx == -INFINITY) {  // every key padded
      for (int64_t j = lane; j < length; j += kWarp) {
        p[j] = 0.0f;
        if (dropout.enabled) dropped[r * length + j] = 0.0f;
      }
      continue;
    }
    float sum = 0.0f;
    for (int64_t j = lane; j < length; j += kWarp) {
      const float e = KeyAllowed(m, j) ? expf(p[j] - mx) : 0.0f;
      p[j] = e;
      sum += e;
    }
    const float inv = 1.0f / WarpSum(sum);
    for (int64_t j = lane; j < length; j += kWarp) {
      const float v = p[j] * inv;
      p[j] = v;
      if (dropout.enabled) {
        const int64_t e = r * length + j;
        dropped[e] =
            v * (DropoutKeep(dropout.seed, e, dropout.rate) ? keep_scale : 0.0f);
      }
    }
  }
}

__global__ void DropoutKernel(int64_t n, AttentionDropout dropout,
                              float keep_scale, const float* probs,
                              float* dropped) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    dropped[i] = probs[i] * (DropoutKeep(dropout.seed, i, dropout.rate)
                                 ? keep_scale
                                 : 0.0f);
  }
}

__global__ void SoftmaxBackwardKernel(int64_t rows, int64_t length, float scale,
                                      AttentionDropout dropout,
                                      float keep_scale, const float* probs,
                                      float* grad) {
  const int lane = threadIdx.x % kWarp;
  const int64_t first =
      blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int64_t step = int64_t{gridDim.x} * kRowsPerBlock;
  for (int64_t r = first; r < rows; r += step) {
    const float* p = probs + r * length;
    float* g = grad + r * length;
    float dot = 0.0f;
    for (int64_t j = lane; j < length; j += kWarp) {
      float v = g[j];
      if (dropout.enabled) {
        v *= DropoutKeep(dropout.seed, r * length + j, dropout.rate)
                 ? keep_scale
                 : 0.0f;  // a blend, as the CPU (-0 stays -0)
        g[j] = v;  // the lane reads it back below
      }
      dot += v * p[j];
    }
    dot = WarpSum(dot);
    for (int64_t j = lane; j < length; j += kWarp) {
      g[j] = p[j] * (g[j] - dot) * scale;
    }
  }
}

// 1 / (1 - rate) on the host, as the CPU.
float KeepScale(const AttentionDropout& d) {
  return d.enabled ? 1.0f / (1.0f - d.rate) : 1.0f;
}

}  // namespace

cudaError_t AttentionSoftmaxForward(int64_t batch, int64_t heads,
                                    int64_t length, const float* mask,
                                    const AttentionDropout& dropout,
                                    float* probs, float* dropped,
                                    cudaStream_t stream) {
  const int64_t rows = batch * heads * length;
  if (rows <= 0) return cudaSuccess;
  if (dropout.enabled && dropped == nullptr) return cudaErrorInvalidValue;
  SoftmaxForwardKernel<<<RowBlocks(rows, kRowsPerBlock), kThreads, 0, stream>>>(
      rows, heads, length, mask, dropout, KeepScale(dropout), probs, dropped);
  return cudaGetLastError();
}

cudaError_t AttentionDropoutForward(int64_t count,
                                    const AttentionDropout& dropout,
                                    const float* probs, float* dropped,
                                    cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  AttentionDropout d = dropout;
  d.enabled = true;  // the call itself asks for the mask
  DropoutKernel<<<Blocks(count), kThreads, 0, stream>>>(count, d, KeepScale(d),
                                                        probs, dropped);
  return cudaGetLastError();
}

cudaError_t AttentionSoftmaxBackward(int64_t batch, int64_t heads,
                                     int64_t length, float scale,
                                     const AttentionDropout& dropout,
                                     const float* probs, float* grad,
                                     cudaStream_t stream) {
  const int64_t rows = batch * heads * length;
  if (rows <= 0) return cudaSuccess;
  SoftmaxBackwardKernel<<<RowBlocks(rows, kRowsPerBlock), kThreads, 0,
                          stream>>>(rows, length, scale, dropout,
                                    KeepScale(dropout), probs, grad);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
