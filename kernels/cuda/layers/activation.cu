// Element-wise activations are grid-stride loops; softmax (forward and
// backward) runs one thread per row so each row sums left to right exactly as
// kernels/cpu/elementwise.cc. Built with --fmad=false: no contracted a*b+c.
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/layers/activation.h"
#include "kernels/cuda/grid_stride.cuh"

namespace lockstep {
namespace cuda {
namespace {

// std::max(v, 0.0f): NaN and -0.0f pass through.
__device__ float Relu(float v) { return v < 0.0f ? 0.0f : v; }
// std::min(std::max(v, 0.0f), 6.0f), NaN and -0.0f included.
__device__ float Relu6(float v) {
  const float r = Relu(v);
  return 6.0f < r ? 6.0f : r;
}
__device__ float Sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

__global__ void PointwiseForwardKernel(int64_t n, int64_t cols,
                                       const float* bias, ActivationKind act,
                                       float* y) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    float v = y[i];
    if (bias != nullptr) v += bias[i % cols];
    switch (act) {
      case ActivationKind::kRelu:
        v = Relu(v);
        break;
      case ActivationKind::kRelu6:
        v = Relu6(v);
        break;
      case ActivationKind::kTanh:
        v = tanhf(v);
        break;
      case ActivationKind::kSigmoid:
        v = Sigmoid(v);
        break;
      default:
        break;
    }
    y[i] = v;
  }
}

__global__ void SoftmaxForwardKernel(int64_t rows, int64_t cols,
                                     const float* bias, float* y) {
  for (int64_t r = FirstIndex(); r < rows; r += Stride()) {
    float* row = y + r * cols;
    if (bias != nullptr) {
      for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
    }
    float m = row[0];
    for (int64_t c = 1; c < cols; ++c) m = m < row[c] ? row[c] : m;
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      row[c] = expf(row[c] - m);
      sum += row[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < cols; ++c) row[c] *= inv;
  }
}

__global__ void PointwiseBackwardKernel(int64_t n, ActivationKind act,
                                        const float* y, float* d) {
  for (int64_t i = FirstIndex(); i < n; i += Stride()) {
    const float yi = y[i];
    switch (act) {
      case ActivationKind::kRelu:
        d[i] = yi > 0.0f ? d[i] : 0.0f;
        break;
      case ActivationKind::kRelu6:
        d[i] = yi > 0.0f && yi < 6.0f ? d[i] : 0.0f;
        break;
      case ActivationKind::kTanh:
        d[i] *= 1.0f - yi * yi;
        break;
      case ActivationKind::kSigmoid:
        d[i] *= yi * (1.0f - yi);
        break;
      default:
        break;
    }
  }
}

// dz = y * (dy - <dy, y>) per row.
__global__ void SoftmaxBackwardKernel(int64_t rows, int64_t cols,
                                      const float* y, float* d) {
  for (int64_t r = FirstIndex(); r < rows; r += Stride()) {
    const float* yy = y + r * cols;
    float* dd = d + r * cols;
    float dot = 0.0f;
    for (int64_t c = 0; c < cols; ++c) dot += dd[c] * yy[c];
    for (int64_t c = 0; c < cols; ++c) dd[c] = yy[c] * (dd[c] - dot);
  }
}

}  // namespace

cudaError_t BiasActivationForward(int64_t rows, int64_t cols, const float* bias,
                                  ActivationKind act, float* y,
                                  cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (act == ActivationKind::kLinear) {
    return bias == nullptr ? cudaSuccess : AddBias(rows, cols, bias, y, stream);
  }
  if (act == ActivationKind::kSoftmax) {
    SoftmaxForwardKernel<<<Blocks(rows), kThreads, 0, stream>>>(rows, cols,
                                                                bias, y);
  } else {
    PointwiseForwardKernel<<<Blocks(n), kThreads, 0, stream>>>(n, cols, bias,
                                                               act, y);
  }
  return cudaGetLastError();
}

cudaError_t ActivationBackwardBiasGrad(int64_t rows, int64_t cols,
                                       ActivationKind act, const float* y,
                                       float* dy, float* dbias,
                                       cudaStream_t stream,
                                       float* bias_workspace) {
  if (cols <= 0) return cudaSuccess;
  if (rows > 0 && act != ActivationKind::kLinear) {
    if (act == ActivationKind::kSoftmax) {
      SoftmaxBackwardKernel<<<Blocks(rows), kThreads, 0, stream>>>(rows, cols,
                                                                   y, dy);
    } else {
      PointwiseBackwardKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(
          rows * cols, act, y, dy);
    }
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  if (dbias == nullptr) return cudaSuccess;
  return BiasGrad(rows < 0 ? 0 : rows, cols, dy, dbias, stream,
                  bias_workspace);
}

}  // namespace cuda
}  // namespace lockstep
