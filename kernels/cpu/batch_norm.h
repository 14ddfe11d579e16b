// Batch normalization over the last (channel) axis of [rows, C] (NHWC images
// have rows = N*H*W): per-channel batch statistics, the affine normalization
// and its backward. Every per-channel sum runs over fixed blocks of
// kBatchNormRowBlock rows, each summed in row order in float, and the blocks
// in block order in double: the result does not depend on the thread count.
#ifndef LOCKSTEP_KERNELS_CPU_BATCH_NORM_H_
#define LOCKSTEP_KERNELS_CPU_BATCH_NORM_H_

#include <cstdint>
#include <vector>

namespace lockstep {

inline constexpr int64_t kBatchNormRowBlock = 256;

// mean[c] and the biased variance var[c] of x [rows, channels] (rows >= 1),
// two passes (the variance from the centred values). `partials` is scratch.
void BatchNormStatistics(int64_t rows, int64_t channels, const float* x,
                         float* mean, float* var,
                         std::vector<double>* partials);

// y = (x - mean) * (gamma * rstd) + beta: centred first, so a mean large
// against the spread costs no precision.
void BatchNormForward(int64_t rows, int64_t channels, const float* x,
                      const float* mean, const float* rstd, const float* gamma,
                      const float* beta, float* y);

// Given dy [rows, channels], ADDS sum(dy * xhat) to dgamma and sum(dy) to
// dbeta (xhat = (x - mean) * rstd) and, when dx is not null, OVERWRITES dx:
//   batch_statistics (training; mean and rstd are the batch's own):
//     dx = gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat));
//   otherwise (mean and rstd are constants, the running statistics):
//     dx = gamma * rstd * dy.
void BatchNormBackward(int64_t rows, int64_t channels, const float* x,
                       const float* dy, const float* mean, const float* rstd,
                       const float* gamma, bool batch_statistics,
                       float* dgamma, float* dbeta, float* dx,
                       std::vector<double>* partials);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_BATCH_NORM_H_
