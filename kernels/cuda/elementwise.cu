// Grid-stride element-wise kernels. BiasGrad keeps the CPU's summation
// order: per column, 256-row blocks each summed from the top, then the
// blocks' sums in order.
#include <cuda_fp16.h>

#include "kernels/cpu/bf16_bits.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/grid_stride.cuh"

namespace lockstep {
namespace cuda {
namespace {

constexpr int64_t kBiasGradRowBlock = 256;  // as kernels/cpu/elementwise.cc

// std::max(v, 0.0f) exactly: NaN and -0.0f pass through.
__device__ float Relu(float v) { return v < 0.0f ? 0.0f : v; }

__global__ void AddBiasKernel(int64_t n, int64_t cols, const float* bias,
                              float* y) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] += bias[i % cols];
}

__global__ void BiasReluKernel(int64_t n, int64_t cols, const float* bias,
                               float* y) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    float v = y[i];
    if (bias != nullptr) v += bias[i % cols];
    y[i] = Relu(v);
  }
}

__global__ void ReluBackwardKernel(int64_t n, const float* y, float* dy) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }
}

__global__ void BiasGradKernel(int64_t rows, int64_t cols, const float* dy,
                               float* dbias) {
  for (int64_t c = FirstIndex(); c < cols; c += Stride()) {
    float total = 0.0f;
    for (int64_t r0 = 0; r0 < rows; r0 += kBiasGradRowBlock) {
      const int64_t r1 =
          r0 + kBiasGradRowBlock < rows ? r0 + kBiasGradRowBlock : rows;
      float acc = 0.0f;
      for (int64_t r = r0; r < r1; ++r) acc += dy[r * cols + c];
      total += acc;
    }
    dbias[c] = total;
  }
}

// Phase 1 of the parallel form: partials[b * cols + c] = the sum of block b
// of column c (consecutive threads take consecutive columns: coalesced).
__global__ void BiasGradBlocksKernel(int64_t rows, int64_t cols,
                                     int64_t blocks, const float* dy,
                                     float* partials) {
  for (int64_t i = FirstIndex(); i < blocks * cols; i += Stride()) {
    const int64_t b = i / cols, c = i % cols;
    const int64_t r0 = b * kBiasGradRowBlock;
    const int64_t r1 =
        r0 + kBiasGradRowBlock < rows ? r0 + kBiasGradRowBlock : rows;
    float acc = 0.0f;
    for (int64_t r = r0; r < r1; ++r) acc += dy[r * cols + c];
    partials[i] = acc;
  }
}

// Phase 2: each column's block sums, in block order.
__global__ void BiasGradSumBlocksKernel(int64_t cols, int64_t blocks,
                                        const float* partials, float* dbias) {
  for (int64_t c = FirstIndex(); c < cols; c += Stride()) {
    float total = 0.0f;
#pragma unroll 8
    for (int64_t b = 0; b < blocks; ++b) total += partials[b * cols + c];
    dbias[c] = total;
  }
}

__global__ void ScaleKernel(int64_t n, float alpha, float* x) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) x[i] *= alpha;
}

__global__ void AxpyKernel(int64_t n, float alpha, const float* x, float* y) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) y[i] += alpha * x[i];
}

// The CPU's bfloat16 rounding (kernels/cpu/bf16_bits.h), widened back to
// float.
__device__ float RoundBf16(float x) {
  return __uint_as_float(
      static_cast<uint32_t>(Bf16FromFloatBits(__float_as_uint(x))) << 16);
}

__global__ void RoundInputsKernel(int64_t n, InputRounding to, const float* x,
                                  float* y) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const float v = x[i];
    y[i] = to == InputRounding::kBf16   ? RoundBf16(v)
           : to == InputRounding::kFp16 ? __half2float(__float2half_rn(v))
                                        : v;
  }
}

__global__ void ToSixteenBitsKernel(int64_t n, InputRounding to, int64_t rows,
                                    int64_t cols, const float* x, int64_t ld,
                                    int64_t stride, uint16_t* y) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const int64_t row = i / cols, col = i - row * cols;
    const int64_t matrix = row / rows;
    const float v = x[matrix * stride + (row - matrix * rows) * ld + col];
    y[i] = to == InputRounding::kBf16 ? Bf16FromFloatBits(__float_as_uint(v))
                                      : __half_as_ushort(__float2half_rn(v));
  }
}

}  // namespace

cudaError_t AddBias(int64_t rows, int64_t cols, const float* bias, float* y,
                    cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  AddBiasKernel<<<Blocks(n), kThreads, 0, stream>>>(n, cols, bias, y);
  return cudaGetLastError();
}

cudaError_t BiasReluForward(int64_t rows, int64_t cols, const float* bias,
                            float* y, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  BiasReluKernel<<<Blocks(n), kThreads, 0, stream>>>(n, cols, bias, y);
  return cudaGetLastError();
}

cudaError_t ReluBackward(int64_t n, const float* y, float* dy,
                         cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ReluBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(n, y, dy);
  return cudaGetLastError();
}

int64_t BiasGradWorkspaceFloats(int64_t rows, int64_t cols) {
  const int64_t blocks = (rows + kBiasGradRowBlock - 1) / kBiasGradRowBlock;
  return blocks > 1 && cols > 0 ? blocks * cols : 0;
}

cudaError_t BiasGrad(int64_t rows, int64_t cols, const float* dy, float* dbias,
                     cudaStream_t stream, float* workspace) {
  if (cols <= 0) return cudaSuccess;
  const int64_t blocks = (rows + kBiasGradRowBlock - 1) / kBiasGradRowBlock;
  if (workspace == nullptr || blocks <= 1) {
    // rows == 0 still writes zeros, as the CPU does.
    BiasGradKernel<<<Blocks(cols), kThreads, 0, stream>>>(rows, cols, dy,
                                                          dbias);
    return cudaGetLastError();
  }
  BiasGradBlocksKernel<<<Blocks(blocks * cols), kThreads, 0, stream>>>(
      rows, cols, blocks, dy, workspace);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  BiasGradSumBlocksKernel<<<Blocks(cols), kThreads, 0, stream>>>(
      cols, blocks, workspace, dbias);
  return cudaGetLastError();
}

cudaError_t Scale(int64_t n, float alpha, float* x, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(n, alpha, x);
  return cudaGetLastError();
}

cudaError_t RoundInputs(InputRounding to, int64_t n, const float* x, float* y,
                        cudaStream_t stream) {
  if (n <= 0 || (to == InputRounding::kNone && x == y)) return cudaSuccess;
  RoundInputsKernel<<<Blocks(n), kThreads, 0, stream>>>(n, to, x, y);
  return cudaGetLastError();
}

cudaError_t ToSixteenBits(InputRounding to, int64_t batch, int64_t rows,
                          int64_t cols, const float* x, int64_t ld,
                          int64_t stride, uint16_t* y, cudaStream_t stream) {
  if (to == InputRounding::kNone) return cudaErrorInvalidValue;
  const int64_t n = batch * rows * cols;
  if (n <= 0) return cudaSuccess;
  ToSixteenBitsKernel<<<Blocks(n), kThreads, 0, stream>>>(n, to, rows, cols, x,
                                                          ld, stride, y);
  return cudaGetLastError();
}

cudaError_t Axpy(int64_t n, float alpha, const float* x, float* y,
                 cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AxpyKernel<<<Blocks(n), kThreads, 0, stream>>>(n, alpha, x, y);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
