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
// The same as BatchNormSums, then BatchNormSquaredDeviations around the
// mean, each divided by rows.
void BatchNormStatistics(int64_t rows, int64_t channels, const float* x,
                         float* mean, float* var,
                         std::vector<double>* partials);
// sum[c] = the sum of x[., c] (rows >= 0).
void BatchNormSums(int64_t rows, int64_t channels, const float* x,
                   double* sum, std::vector<double>* partials);
// sums[c] = the sum of (x[., c] - shift[c]) and sums[channels + c] = the
// sum of (x[., c] - shift[c])^2 (rows >= 0): both moments in one pass,
// precise while shift is near the mean (sync batch norm shifts by the
// running mean).
void BatchNormShiftedSums(int64_t rows, int64_t channels, const float* x,
                          const float* shift, double* sums,
                          std::vector<double>* partials);
// out[c] = the sum of (x[., c] - mean[c])^2 (rows >= 0).
void BatchNormSquaredDeviations(int64_t rows, int64_t channels, const float* x,
                                const float* mean, double* out,
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
// The same as BatchNormBackwardSums, then BatchNormBackwardInput over this
// batch's rows.
void BatchNormBackward(int64_t rows, int64_t channels, const float* x,
                       const float* dy, const float* mean, const float* rstd,
                       const float* gamma, bool batch_statistics,
                       float* dgamma, float* dbeta, float* dx,
                       std::vector<double>* partials);

// The two sums backward needs, per channel: sums[c] = sum(dy) and
// sums[channels + c] = sum(dy * (x - mean)) (rows >= 0). Sync batch norm
// adds them over every replica before BatchNormBackwardInput.
void BatchNormBackwardSums(int64_t rows, int64_t channels, const float* x,
                           const float* dy, const float* mean, double* sums,
                           std::vector<double>* partials);
// dx of BatchNormBackward from sums of BatchNormBackwardSums' layout taken
// over `stat_rows` rows (this batch's, or all replicas' for sync batch
// norm); stat_rows == 0 means the statistics are constants (dx = gamma *
// rstd * dy).
void BatchNormBackwardInput(int64_t rows, int64_t channels, const float* x,
                            const float* dy, const float* mean,
                            const float* rstd, const float* gamma,
                            const double* sums, double stat_rows, float* dx);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_BATCH_NORM_H_
