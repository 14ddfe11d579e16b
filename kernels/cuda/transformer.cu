// Grid-stride kernels for the text-model layers: add, LayerNorm and
// gather_positions (embeddings are embedding.cu, attention's softmax and
// dropout attention.cu). Row reductions use warp shuffles in a fixed tree and a fixed-order pass over the
// warps' sums; scatter-adds give each output element one thread that walks
// its contributions in the CPU's order. Built with --fmad=false, so
// element-wise products and sums round as on the CPU.
#include "kernels/cpu/dropout_mask.h"
#include "kernels/cuda/float_index.cuh"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/warp_reduce.cuh"
#include "kernels/cuda/transformer.h"

namespace lockstep {
namespace cuda {
namespace {

constexpr int64_t kNormRowBlock = 64;  // core/layers/layer_norm.cc's
constexpr int kMaxAddInputs = 8;       // pointers one AddKernel takes

// ---- add ----

struct AddInputs {
  const float* x[kMaxAddInputs];
  int count;
};

// y = (accumulate ? y : x[0]) + the rest, left to right.
__global__ void AddKernel(int64_t n, AddInputs in, bool accumulate, float* y) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    float acc = accumulate ? y[i] : in.x[0][i];
    for (int j = accumulate ? 0 : 1; j < in.count; ++j) acc += in.x[j][i];
    y[i] = acc;
  }
}

// ---- layer_norm ----

// One block per row (grid-stride over rows).
__global__ void LayerNormForwardKernel(int64_t rows, int64_t width,
                                       float epsilon, const float* x,
                                       const float* gamma, const float* beta,
                                       float* y, float* mean_out,
                                       float* rstd_out) {
  __shared__ float shared[kThreads / kWarp];
  const float w = static_cast<float>(width);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * width;
    float sum = 0.0f;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) sum += xr[c];
    const float mean = BlockSum(sum, shared) / w;
    float var = 0.0f;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      const float d = xr[c] - mean;
      var += d * d;
    }
    var = BlockSum(var, shared) / w;
    const float rstd = 1.0f / sqrtf(var + epsilon);
    float* yr = y + r * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
    if (threadIdx.x == 0) {
      mean_out[r] = mean;
      rstd_out[r] = rstd;
    }
  }
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy * gamma; a block per
// row.
__global__ void LayerNormDxKernel(int64_t rows, int64_t width, const float* x,
                                  const float* gamma, const float* mean_in,
                                  const float* rstd_in, const float* dy,
                                  float* dx) {
  __shared__ float shared[kThreads / kWarp];
  const float inv_w = 1.0f / static_cast<float>(width);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * width;
    const float* dyr = dy + r * width;
    const float mean = mean_in[r], rstd = rstd_in[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      const float xhat = (xr[c] - mean) * rstd;
      const float g = dyr[c] * gamma[c];
      sum_g += g;
      sum_gx += g * xhat;
    }
    const float mg = BlockSum(sum_g, shared) * inv_w;
    const float mgx = BlockSum(sum_gx, shared) * inv_w;
    float* dxr = dx + r * width;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
      const float xhat = (xr[c] - mean) * rstd;
      dxr[c] = rstd * (dyr[c] * gamma[c] - mg - xhat * mgx);
    }
  }
}

// partial[b, 0, c] and partial[b, 1, c]: rows b*64.. of column c's dy *
// xhat and dy, summed from the top (the CPU's per-block sums).
__global__ void LayerNormPartialKernel(int64_t rows, int64_t width,
                                       int64_t blocks, const float* x,
                                       const float* mean_in,
                                       const float* rstd_in, const float* dy,
                                       float* partial) {
  for (int64_t i = FirstIndex(); i < blocks * width; i += Stride()) {
    const int64_t b = i / width, c = i % width;
    const int64_t r1 =
        (b + 1) * kNormRowBlock < rows ? (b + 1) * kNormRowBlock : rows;
    float pg = 0.0f, pb = 0.0f;
    for (int64_t r = b * kNormRowBlock; r < r1; ++r) {
      const float xhat = (x[r * width + c] - mean_in[r]) * rstd_in[r];
      pg += dy[r * width + c] * xhat;
      pb += dy[r * width + c];
    }
    partial[b * 2 * width + c] = pg;
    partial[b * 2 * width + width + c] = pb;
  }
}

// dgamma[c], dbeta[c] += the blocks' sums, block by block.
__global__ void LayerNormFinishKernel(int64_t width, int64_t blocks,
                                      const float* partial, float* dgamma,
                                      float* dbeta) {
  for (int64_t c = FirstIndex(); c < width; c += Stride()) {
    float g = dgamma[c], b = dbeta[c];
    for (int64_t k = 0; k < blocks; ++k) {
      g += partial[k * 2 * width + c];
      b += partial[k * 2 * width + width + c];
    }
    dgamma[c] = g;
    dbeta[c] = b;
  }
}

// Threads for a row of `width`: whole warps, at most kThreads.
int NormThreads(int64_t width) {
  const int64_t t = (width + kWarp - 1) / kWarp * kWarp;
  return static_cast<int>(t < kThreads ? t : kThreads);
}

// ---- gather_positions ----

__global__ void GatherForwardKernel(int64_t n, int64_t length, int64_t width,
                                    int64_t count, const float* x,
                                    const float* positions, float* y) {
  for (int64_t i = FirstIndex(); i < n * count * width; i += Stride()) {
    const int64_t sp = i / width, c = i % width, s = sp / count;
    const int64_t row = IndexOf(positions[sp], length);
    y[i] = row < 0 ? 0.0f : x[(s * length + row) * width + c];
  }
}

// Thread (s, c) walks sample s's positions in order: rows gathered twice
// sum in the CPU's order, and no two threads write one element.
__global__ void GatherBackwardKernel(int64_t n, int64_t length, int64_t width,
                                     int64_t count, const float* positions,
                                     const float* dy, float* dx) {
  for (int64_t i = FirstIndex(); i < n * width; i += Stride()) {
    const int64_t s = i / width, c = i % width;
    for (int64_t p = 0; p < count; ++p) {
      const int64_t row = IndexOf(positions[s * count + p], length);
      if (row < 0) continue;
      dx[(s * length + row) * width + c] += dy[(s * count + p) * width + c];
    }
  }
}

}  // namespace

cudaError_t AddForward(int64_t n, int k, const float* const* x, float* y,
                       cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (k < 1) return cudaErrorInvalidValue;
  // Inputs beyond the first kernel's are added to y by later ones, which
  // keeps the left-to-right order.
  for (int start = 0; start < k; start += kMaxAddInputs) {
    AddInputs in{};
    in.count = k - start < kMaxAddInputs ? k - start : kMaxAddInputs;
    for (int j = 0; j < in.count; ++j) in.x[j] = x[start + j];
    AddKernel<<<Blocks(n), kThreads, 0, stream>>>(n, in, start > 0, y);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t LayerNormForward(int64_t rows, int64_t width, float epsilon,
                             const float* x, const float* gamma,
                             const float* beta, float* y, float* stats,
                             cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return cudaSuccess;
  const int grid = static_cast<int>(rows < kMaxBlocks ? rows : kMaxBlocks);
  LayerNormForwardKernel<<<grid, NormThreads(width), 0, stream>>>(
      rows, width, epsilon, x, gamma, beta, y, stats, stats + rows);
  return cudaGetLastError();
}

int64_t LayerNormBackwardWorkspaceFloats(int64_t rows, int64_t width) {
  if (rows <= 0 || width <= 0) return 0;
  return (rows + kNormRowBlock - 1) / kNormRowBlock * 2 * width;
}

cudaError_t LayerNormBackward(int64_t rows, int64_t width, const float* x,
                              const float* gamma, const float* stats,
                              const float* dy, float* dx, float* dgamma,
                              float* dbeta, float* workspace,
                              cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return cudaSuccess;
  const float* mean = stats;
  const float* rstd = stats + rows;
  // The parameter gradients first: dx may be dy (the CPU allows it).
  const int64_t blocks = (rows + kNormRowBlock - 1) / kNormRowBlock;
  LayerNormPartialKernel<<<Blocks(blocks * width), kThreads, 0, stream>>>(
      rows, width, blocks, x, mean, rstd, dy, workspace);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  LayerNormFinishKernel<<<Blocks(width), kThreads, 0, stream>>>(
      width, blocks, workspace, dgamma, dbeta);
  err = cudaGetLastError();
  if (err != cudaSuccess || dx == nullptr) return err;
  const int grid = static_cast<int>(rows < kMaxBlocks ? rows : kMaxBlocks);
  LayerNormDxKernel<<<grid, NormThreads(width), 0, stream>>>(
      rows, width, x, gamma, mean, rstd, dy, dx);
  return cudaGetLastError();
}

cudaError_t GatherPositionsForward(int64_t n, int64_t length, int64_t width,
                                   int64_t count, const float* x,
                                   const float* positions, float* y,
                                   cudaStream_t stream) {
  const int64_t total = n * count * width;
  if (total <= 0) return cudaSuccess;
  GatherForwardKernel<<<Blocks(total), kThreads, 0, stream>>>(
      n, length, width, count, x, positions, y);
  return cudaGetLastError();
}

cudaError_t GatherPositionsBackward(int64_t n, int64_t length, int64_t width,
                                    int64_t count, const float* positions,
                                    const float* dy, float* dx,
                                    cudaStream_t stream) {
  if (n <= 0 || length <= 0 || width <= 0) return cudaSuccess;
  cudaError_t err = cudaMemsetAsync(
      dx, 0, static_cast<size_t>(n * length * width) * sizeof(float), stream);
  if (err != cudaSuccess || count <= 0) return err;
  GatherBackwardKernel<<<Blocks(n * width), kThreads, 0, stream>>>(
      n, length, width, count, positions, dy, dx);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
