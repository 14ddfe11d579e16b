// Batch-norm kernels in the CPU's summation order (see batch_norm.h).
#include "kernels/cpu/batch_norm.h"
#include "kernels/cuda/grid_stride.cuh"
#include "kernels/cuda/layers/batch_norm.h"
#include "kernels/cuda/optimizer_grid.h"

namespace lockstep {
namespace cuda {
namespace {

int64_t RowBlocks(int64_t rows) {
  return (rows + kBatchNormRowBlock - 1) / kBatchNormRowBlock;
}

// The end of row block b.
__device__ inline int64_t BlockEnd(int64_t b, int64_t rows) {
  const int64_t end = (b + 1) * kBatchNormRowBlock;
  return end < rows ? end : rows;
}

// What BlockSums adds per block and channel: x; (x - center)^2; both
// x - center and its square; dy and dy * (x - center).
enum SumKind : int { kPlain = 0, kSquared = 1, kShifted = 2, kBackward = 3 };

__host__ __device__ inline int Terms(int kind) {
  return kind == kShifted || kind == kBackward ? 2 : 1;
}

// Per block of rows and channel, the kind's one or two sums in float, in
// row order, in the CPU's layout [block][term][channels].
__global__ void BlockSums(int kind, int64_t rows, int64_t channels,
                          const float* x, const float* dy,
                          const float* center, double* partial) {
  const int64_t blocks = (rows + kBatchNormRowBlock - 1) / kBatchNormRowBlock;
  const int terms = Terms(kind);
  for (int64_t i = FirstIndex(); i < blocks * channels; i += Stride()) {
    const int64_t b = i / channels, c = i % channels;
    const int64_t end = BlockEnd(b, rows);
    float s0 = 0.0f, s1 = 0.0f;
    for (int64_t r = b * kBatchNormRowBlock; r < end; ++r) {
      const float v = x[r * channels + c];
      if (kind == kPlain) {
        s0 += v;
        continue;
      }
      const float d = v - center[c];
      if (kind == kSquared) {
        s0 += d * d;
      } else if (kind == kShifted) {
        s0 += d;
        s1 += d * d;
      } else {
        const float g = dy[r * channels + c];
        s0 += g;
        s1 += g * d;
      }
    }
    partial[(b * terms) * channels + c] = s0;
    if (terms == 2) partial[(b * terms + 1) * channels + c] = s1;
  }
}

// out[c] = (float)(sum over blocks, in order, of partial / rows).
__global__ void CombineToMean(int64_t rows, int64_t channels, int64_t blocks,
                              const double* partial, float* out) {
  for (int64_t c = FirstIndex(); c < channels; c += Stride()) {
    double s = 0.0;
    for (int64_t b = 0; b < blocks; ++b) s += partial[b * channels + c];
    out[c] = static_cast<float>(s / static_cast<double>(rows));
  }
}

__global__ void RstdKernel(int64_t channels, const float* var, float eps,
                           float* rstd) {
  for (int64_t c = FirstIndex(); c < channels; c += Stride()) {
    rstd[c] = 1.0f / sqrtf(var[c] + eps);
  }
}

__global__ void ForwardKernel(int64_t total, int64_t channels, const float* x,
                              const float* mean, const float* rstd,
                              const float* gamma, const float* beta,
                              float* y) {
  for (int64_t i = FirstIndex(); i < total; i += Stride()) {
    const int64_t c = i % channels;
    const float scale = gamma[c] * rstd[c];
    y[i] = (x[i] - mean[c]) * scale + beta[c];
  }
}

// The per-channel step of the CPU's BatchNormBackward: the parameter
// gradients and dx = k * dy + a * (x - mean) + b's coefficients.
__global__ void BackwardCoefficients(int64_t rows, int64_t channels,
                                     int64_t blocks, const double* partial,
                                     const float* rstd, const float* gamma,
                                     bool batch_statistics, float* dgamma,
                                     float* dbeta, float* coef) {
  for (int64_t c = FirstIndex(); c < channels; c += Stride()) {
    double sum_dy = 0.0, sum_dyx = 0.0;
    for (int64_t b = 0; b < blocks; ++b) {
      sum_dy += partial[(b * 2) * channels + c];
      sum_dyx += partial[(b * 2 + 1) * channels + c];
    }
    const double sum_dy_xhat = sum_dyx * rstd[c];
    dgamma[c] += static_cast<float>(sum_dy_xhat);
    dbeta[c] += static_cast<float>(sum_dy);
    const float k = gamma[c] * rstd[c];
    float a = 0.0f, bb = 0.0f;
    if (batch_statistics) {
      const double inv_rows = 1.0 / static_cast<double>(rows);
      a = static_cast<float>(-k * sum_dy_xhat * inv_rows * rstd[c]);
      bb = static_cast<float>(-k * sum_dy * inv_rows);
    }
    coef[c] = k;
    coef[channels + c] = a;
    coef[2 * channels + c] = bb;
  }
}

__global__ void DxKernel(int64_t total, int64_t channels, const float* x,
                         const float* dy, const float* mean, const float* coef,
                         float* dx) {
  for (int64_t i = FirstIndex(); i < total; i += Stride()) {
    const int64_t c = i % channels;
    dx[i] = coef[c] * dy[i] + coef[channels + c] * (x[i] - mean[c]) +
            coef[2 * channels + c];
  }
}

// out[k] = the sum over blocks, in order, of partial[b * width + k].
__global__ void CombineBlocks(int64_t width, int64_t blocks,
                              const double* partial, double* out) {
  for (int64_t k = FirstIndex(); k < width; k += Stride()) {
    double s = 0.0;
    for (int64_t b = 0; b < blocks; ++b) s += partial[b * width + k];
    out[k] = s;
  }
}

__global__ void AddParamGradsKernel(int64_t channels, const double* sums,
                                    const float* rstd, float* dgamma,
                                    float* dbeta) {
  for (int64_t c = FirstIndex(); c < channels; c += Stride()) {
    dgamma[c] += static_cast<float>(sums[channels + c] * rstd[c]);
    dbeta[c] += static_cast<float>(sums[c]);
  }
}

// kernels/cpu's BatchNormBackwardInput coefficients from summed sums.
__global__ void InputGradCoefficients(int64_t channels, const double* sums,
                                      double stat_rows, const float* rstd,
                                      const float* gamma, float* coef) {
  for (int64_t c = FirstIndex(); c < channels; c += Stride()) {
    const float k = gamma[c] * rstd[c];
    float a = 0.0f, bb = 0.0f;
    if (stat_rows > 0) {
      const double sum_dy = sums[c];
      const double sum_dy_xhat = sums[channels + c] * rstd[c];
      const double inv_rows = 1.0 / stat_rows;
      a = static_cast<float>(-k * sum_dy_xhat * inv_rows * rstd[c]);
      bb = static_cast<float>(-k * sum_dy * inv_rows);
    }
    coef[c] = k;
    coef[channels + c] = a;
    coef[2 * channels + c] = bb;
  }
}

__global__ void AddStatisticsKernel(int64_t channels, float samples,
                                    double bessel, const float* mean,
                                    const float* var, float* dmean,
                                    float* dvar) {
  for (int64_t c = FirstIndex(); c < channels; c += Stride()) {
    dmean[c] += samples * mean[c];
    dvar[c] += static_cast<float>(samples * (var[c] * bessel));
  }
}

__global__ void MovingAverageKernel(int64_t n, float keep, float take,
                                    double inv, float* v, const float* g,
                                    const double* skip_sum_squares,
                                    float unscale) {
  MovingAverageThread(FirstIndex(), Stride(), n, keep, take, inv, v, g,
                      skip_sum_squares, unscale);
}

}  // namespace

int64_t BatchNormWorkspaceDoubles(int64_t rows, int64_t channels) {
  return 2 * RowBlocks(rows) * channels;
}

cudaError_t BatchNormStatistics(int64_t rows, int64_t channels,
                                const float* x, float* mean, float* var,
                                double* workspace, cudaStream_t stream) {
  if (rows <= 0 || channels <= 0) return cudaSuccess;
  const int64_t blocks = RowBlocks(rows);
  BlockSums<<<Blocks(blocks * channels), kThreads, 0, stream>>>(
      kPlain, rows, channels, x, nullptr, nullptr, workspace);
  CombineToMean<<<Blocks(channels), kThreads, 0, stream>>>(
      rows, channels, blocks, workspace, mean);
  BlockSums<<<Blocks(blocks * channels), kThreads, 0, stream>>>(
      kSquared, rows, channels, x, nullptr, mean, workspace);
  CombineToMean<<<Blocks(channels), kThreads, 0, stream>>>(
      rows, channels, blocks, workspace, var);
  return cudaGetLastError();
}

cudaError_t BatchNormRstd(int64_t channels, const float* var, float epsilon,
                          float* rstd, cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  RstdKernel<<<Blocks(channels), kThreads, 0, stream>>>(channels, var,
                                                        epsilon, rstd);
  return cudaGetLastError();
}

cudaError_t BatchNormForward(int64_t rows, int64_t channels, const float* x,
                             const float* mean, const float* rstd,
                             const float* gamma, const float* beta, float* y,
                             cudaStream_t stream) {
  const int64_t total = rows * channels;
  if (total <= 0) return cudaSuccess;
  ForwardKernel<<<Blocks(total), kThreads, 0, stream>>>(
      total, channels, x, mean, rstd, gamma, beta, y);
  return cudaGetLastError();
}

cudaError_t BatchNormBackward(int64_t rows, int64_t channels, const float* x,
                              const float* dy, const float* mean,
                              const float* rstd, const float* gamma,
                              bool batch_statistics, float* dgamma,
                              float* dbeta, float* dx, double* workspace,
                              float* coefficients, cudaStream_t stream) {
  if (rows <= 0 || channels <= 0) return cudaSuccess;
  const int64_t blocks = RowBlocks(rows);
  BlockSums<<<Blocks(blocks * channels), kThreads, 0, stream>>>(
      kBackward, rows, channels, x, dy, mean, workspace);
  BackwardCoefficients<<<Blocks(channels), kThreads, 0, stream>>>(
      rows, channels, blocks, workspace, rstd, gamma, batch_statistics, dgamma,
      dbeta, coefficients);
  if (dx != nullptr) {
    const int64_t total = rows * channels;
    DxKernel<<<Blocks(total), kThreads, 0, stream>>>(total, channels, x, dy,
                                                     mean, coefficients, dx);
  }
  return cudaGetLastError();
}

cudaError_t BatchNormChannelSums(BatchNormSumKind kind, int64_t rows,
                                 int64_t channels, const float* x,
                                 const float* dy, const float* center,
                                 double* sums, double* workspace,
                                 cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  const int k = kind == BatchNormSumKind::kShifted   ? kShifted
                : kind == BatchNormSumKind::kSquared ? kSquared
                                                     : kBackward;
  const int64_t width = Terms(k) * channels;
  const int64_t blocks = RowBlocks(rows);
  if (blocks > 0) {
    BlockSums<<<Blocks(blocks * channels), kThreads, 0, stream>>>(
        k, rows, channels, x, dy, center, workspace);
  }
  CombineBlocks<<<Blocks(width), kThreads, 0, stream>>>(width, blocks,
                                                        workspace, sums);
  return cudaGetLastError();
}

cudaError_t BatchNormAddParamGrads(int64_t channels, const double* sums,
                                   const float* rstd, float* dgamma,
                                   float* dbeta, cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  AddParamGradsKernel<<<Blocks(channels), kThreads, 0, stream>>>(
      channels, sums, rstd, dgamma, dbeta);
  return cudaGetLastError();
}

cudaError_t BatchNormInputGrad(int64_t rows, int64_t channels, const float* x,
                               const float* dy, const float* mean,
                               const float* rstd, const float* gamma,
                               const double* sums, double stat_rows,
                               float* coefficients, float* dx,
                               cudaStream_t stream) {
  const int64_t total = rows * channels;
  if (total <= 0) return cudaSuccess;
  InputGradCoefficients<<<Blocks(channels), kThreads, 0, stream>>>(
      channels, sums, stat_rows, rstd, gamma, coefficients);
  DxKernel<<<Blocks(total), kThreads, 0, stream>>>(total, channels, x, dy,
                                                   mean, coefficients, dx);
  return cudaGetLastError();
}

cudaError_t BatchNormAddStatistics(int64_t channels, float samples,
                                   double bessel, const float* mean,
                                   const float* var, float* dmean, float* dvar,
                                   cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  AddStatisticsKernel<<<Blocks(channels), kThreads, 0, stream>>>(
      channels, samples, bessel, mean, var, dmean, dvar);
  return cudaGetLastError();
}

cudaError_t MovingAverageUpdate(int64_t n, float momentum, double inv_samples,
                                float* value, const float* grad,
                                cudaStream_t stream,
                                const double* skip_sum_squares, float unscale) {
  if (n <= 0) return cudaSuccess;
  MovingAverageKernel<<<Blocks(n), kThreads, 0, stream>>>(
      n, momentum, 1.0f - momentum, inv_samples, value, grad, skip_sum_squares,
      unscale);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace lockstep
