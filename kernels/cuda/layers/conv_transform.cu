// Grid-stride gathers: every output element is written exactly once.
#include "kernels/cuda/layers/conv_transform.h"
#include "kernels/cuda/grid_stride.cuh"

namespace lockstep {
namespace cuda {
namespace {

// out [cols, rows] = in [rows, cols]^T, indexed by the output.
__global__ void TransposeKernel(int64_t rows, int64_t cols, const float* in,
                                float* out) {
  const int64_t n = rows * cols;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const int64_t c = i / rows, r = i % rows;
    out[i] = in[r * cols + c];
  }
}

// keras [t, c, f] = torch [f, c, t] (to_keras), or the reverse; indexed by
// the output.
__global__ void ConvKernelLayout(int64_t f, int64_t c, int64_t khw,
                                 bool to_keras, const float* in, float* out) {
  const int64_t n = f * c * khw;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    if (to_keras) {
      const int64_t fi = i % f, ci = (i / f) % c, t = i / (f * c);
      out[i] = in[(fi * c + ci) * khw + t];
    } else {
      const int64_t t = i % khw, ci = (i / khw) % c, fi = i / (khw * c);
      out[i] = in[(t * c + ci) * f + fi];
    }
  }
}

// Per sample, out [cols, rows] = in [rows, cols]^T; indexed by the output.
__global__ void BatchedTransposeKernel(int64_t batch, int64_t rows,
                                       int64_t cols, const float* in,
                                       float* out) {
  const int64_t per = rows * cols, n = batch * per;
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const int64_t s = i / per, j = i % per;
    const int64_t c = j / rows, r = j % rows;
    out[i] = in[s * per + r * cols + c];
  }
}

__global__ void PadKernel(int64_t total, int64_t h, int64_t w, int64_t c,
                          int64_t top, int64_t left, int64_t out_h,
                          int64_t out_w, const float* x, float* out) {
  for (int64_t i = FirstIndex(); i < total; i += Stride()) {
    const int64_t ch = i % c;
    const int64_t ox = (i / c) % out_w;
    const int64_t oy = (i / (c * out_w)) % out_h;
    const int64_t s = i / (c * out_w * out_h);
    const int64_t iy = oy - top, ix = ox - left;
    out[i] = (iy >= 0 && iy < h && ix >= 0 && ix < w)
                 ? x[((s * h + iy) * w + ix) * c + ch]
                 : 0.0f;
  }
}

__global__ void CropKernel(int64_t total, int64_t h, int64_t w, int64_t c,
                           int64_t top, int64_t left, int64_t out_h,
                           int64_t out_w, const float* padded, float* dx) {
  for (int64_t i = FirstIndex(); i < total; i += Stride()) {
    const int64_t ch = i % c;
    const int64_t ix = (i / c) % w;
    const int64_t iy = (i / (c * w)) % h;
    const int64_t s = i / (c * w * h);
    dx[i] = padded[((s * out_h + iy + top) * out_w + ix + left) * c + ch];
  }
}

cudaError_t Transpose(int64_t rows, int64_t cols, const float* in, float* out,
                      cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  TransposeKernel<<<Blocks(n), kThreads, 0, stream>>>(rows, cols, in, out);
  return cudaGetLastError();
}

}  // namespace

cudaError_t KerasToCudnnFilter(int64_t khwc, int64_t filters, const float* in,
                               float* out, cudaStream_t stream) {
  return Transpose(khwc, filters, in, out, stream);
}

cudaError_t CudnnToKerasFilter(int64_t khwc, int64_t filters, const float* in,
                               float* out, cudaStream_t stream) {
  return Transpose(filters, khwc, in, out, stream);
}

namespace {
cudaError_t BatchedTranspose(int64_t batch, int64_t rows, int64_t cols,
                             const float* in, float* out, cudaStream_t stream) {
  const int64_t n = batch * rows * cols;
  if (n <= 0) return cudaSuccess;
  BatchedTransposeKernel<<<Blocks(n), kThreads, 0, stream>>>(batch, rows, cols,
                                                             in, out);
  return cudaGetLastError();
}
}  // namespace

cudaError_t NhwcToNchw(int64_t n, int64_t hw, int64_t c, const float* x,
                       float* y, cudaStream_t stream) {
  return BatchedTranspose(n, hw, c, x, y, stream);
}

cudaError_t NchwToNhwc(int64_t n, int64_t hw, int64_t c, const float* x,
                       float* y, cudaStream_t stream) {
  return BatchedTranspose(n, c, hw, x, y, stream);
}

cudaError_t PadNhwc(int64_t n, int64_t h, int64_t w, int64_t c, int64_t top,
                    int64_t left, int64_t out_h, int64_t out_w, const float* x,
                    float* out, cudaStream_t stream) {
  const int64_t total = n * out_h * out_w * c;
  if (total <= 0) return cudaSuccess;
  PadKernel<<<Blocks(total), kThreads, 0, stream>>>(total, h, w, c, top, left,
                                                    out_h, out_w, x, out);
  return cudaGetLastError();
}

cudaError_t CropNhwc(int64_t n, int64_t h, int64_t w, int64_t c, int64_t top,
                     int64_t left, int64_t out_h, int64_t out_w,
                     const float* padded, float* dx, cudaStream_t stream) {
  const int64_t total = n * h * w * c;
  if (total <= 0) return cudaSuccess;
  CropKernel<<<Blocks(total), kThreads, 0, stream>>>(total, h, w, c, top, left,
                                                     out_h, out_w, padded, dx);
  return cudaGetLastError();
}

namespace {
cudaError_t LaunchConvKernelLayout(int64_t f, int64_t c, int64_t khw,
                                   bool to_keras, const float* in, float* out,
                                   cudaStream_t stream) {
  const int64_t n = f * c * khw;
  if (n <= 0) return cudaSuccess;
  ConvKernelLayout<<<Blocks(n), kThreads, 0, stream>>>(f, c, khw, to_keras, in,
                                                       out);
  return cudaGetLastError();
}
}  // namespace

cudaError_t TorchToKerasConvKernel(int64_t f, int64_t c, int64_t khw,
                                   const float* torch, float* keras,
                                   cudaStream_t stream) {
  return LaunchConvKernelLayout(f, c, khw, true, torch, keras, stream);
}

cudaError_t KerasToTorchConvKernel(int64_t f, int64_t c, int64_t khw,
                                   const float* keras, float* torch,
                                   cudaStream_t stream) {
  return LaunchConvKernelLayout(f, c, khw, false, keras, torch, stream);
}

}  // namespace cuda
}  // namespace lockstep
