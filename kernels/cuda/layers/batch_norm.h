// kernels/cpu/batch_norm.h on device buffers, in the CPU's order and so with
// its bits (built with --fmad=false): each block of kBatchNormRowBlock rows
// summed per channel in float in row order (one thread per block and
// channel), the blocks combined in double in block order (one thread per
// channel). Also the layer's small per-channel steps (rstd, the running
// statistics' "gradients"). Every function enqueues on `stream` and
// returns the launch error (cudaSuccess for empty input).
#ifndef LOCKSTEP_KERNELS_CUDA_LAYERS_BATCH_NORM_H_
#define LOCKSTEP_KERNELS_CUDA_LAYERS_BATCH_NORM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lockstep {
namespace cuda {

// Doubles of `workspace` the statistics and the backward need.
int64_t BatchNormWorkspaceDoubles(int64_t rows, int64_t channels);

// mean and biased var of x [rows, channels] (rows >= 1).
cudaError_t BatchNormStatistics(int64_t rows, int64_t channels,
                                const float* x, float* mean, float* var,
                                double* workspace, cudaStream_t stream);

// rstd[c] = 1 / sqrt(var[c] + epsilon), in float as the CPU layer.
cudaError_t BatchNormRstd(int64_t channels, const float* var, float epsilon,
                          float* rstd, cudaStream_t stream);

// y = (x - mean) * (gamma * rstd) + beta.
cudaError_t BatchNormForward(int64_t rows, int64_t channels, const float* x,
                             const float* mean, const float* rstd,
                             const float* gamma, const float* beta, float* y,
                             cudaStream_t stream);

// BatchNormBackward of kernels/cpu/batch_norm.h: ADDS to dgamma and dbeta,
// OVERWRITES dx when not null. `coefficients` holds 3 * channels floats.
cudaError_t BatchNormBackward(int64_t rows, int64_t channels, const float* x,
                              const float* dy, const float* mean,
                              const float* rstd, const float* gamma,
                              bool batch_statistics, float* dgamma,
                              float* dbeta, float* dx, double* workspace,
                              float* coefficients, cudaStream_t stream);

// Sync batch norm's per-channel sums over x [rows, channels] (rows >= 0)
// into `sums` (device doubles), in kernels/cpu's ChannelSums order (each
// block of rows in float in row order, the blocks in double in block
// order), so the bits are the CPU's:
//   kShifted:  [sum(x - center) | sum((x - center)^2)]  (2 * channels)
//   kSquared:  sum((x - center)^2)                       (channels)
//   kBackward: [sum(dy) | sum(dy * (x - center))]        (2 * channels)
// `workspace` holds BatchNormWorkspaceDoubles(rows, channels).
enum class BatchNormSumKind { kShifted, kSquared, kBackward };
cudaError_t BatchNormChannelSums(BatchNormSumKind kind, int64_t rows,
                                 int64_t channels, const float* x,
                                 const float* dy, const float* center,
                                 double* sums, double* workspace,
                                 cudaStream_t stream);
// From this replica's kBackward sums: dgamma[c] += (float)(sums[channels +
// c] * rstd[c]), dbeta[c] += (float)sums[c].
cudaError_t BatchNormAddParamGrads(int64_t channels, const double* sums,
                                   const float* rstd, float* dgamma,
                                   float* dbeta, cudaStream_t stream);
// dx of kernels/cpu's BatchNormBackwardInput: from kBackward-layout sums
// taken over stat_rows rows (every replica's for sync batch norm).
// `coefficients` holds 3 * channels floats.
cudaError_t BatchNormInputGrad(int64_t rows, int64_t channels, const float* x,
                               const float* dy, const float* mean,
                               const float* rstd, const float* gamma,
                               const double* sums, double stat_rows,
                               float* coefficients, float* dx,
                               cudaStream_t stream);

// The running statistics' "gradients" (core/layers/batch_norm.h):
// dmean[c] += samples * mean[c]; dvar[c] += samples * (var[c] * bessel).
cudaError_t BatchNormAddStatistics(int64_t channels, float samples,
                                   double bessel, const float* mean,
                                   const float* var, float* dmean, float* dvar,
                                   cudaStream_t stream);

// The step's update of a run of kMovingAverage values (core/train/optimizer.h's
// UpdateMovingAverages): v = v * momentum + (float)(g * inv_samples) *
// (1 - momentum). With `skip_sum_squares` (a device pointer), nothing
// changes when GradientsOverflowed(*skip_sum_squares, unscale)
// (kernels/cuda/overflow.h): fp16's skipped step leaves the averages too.
cudaError_t MovingAverageUpdate(int64_t n, float momentum, double inv_samples,
                                float* value, const float* grad,
                                cudaStream_t stream,
                                const double* skip_sum_squares = nullptr,
                                float unscale = 1.0f);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_LAYERS_BATCH_NORM_H_
