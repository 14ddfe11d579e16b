// Fused optimizer updates on the GPU with core/train/optimizer.cc's math, operation
// for operation (built with --fmad=false; sqrt and division are IEEE), so a
// GPU replica's parameters match a CPU replica's bit for bit. The step's
// scalars are computed on the host by the Make* functions, as Optimizer::Apply
// computes them.
#ifndef LOCKSTEP_KERNELS_CUDA_OPTIMIZER_H_
#define LOCKSTEP_KERNELS_CUDA_OPTIMIZER_H_

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/overflow.h"

namespace lockstep {
namespace cuda {

// What the update does to the summed gradients first, read on the device
// (no wait for the host). sum_squares: a device pointer to the sum of
// squares of every gradient the optimizer updates (SumSquaresPartials then
// SumPartials below); null when nothing below needs it.
//   - Loss scaling (precision "fp16", core/train/loss_scale.h): the
//     gradients are `unscale`'s inverse times the true ones; each is
//     multiplied by unscale (1 / the scale, a power of two: exact) first,
//     and with skip_nonfinite the whole update is skipped (parameters and
//     slots untouched) when *sum_squares is not finite: an inf or NaN in
//     some gradient. unscale 1 changes no bit.
//   - Clipping by the global norm (Keras' global_clipnorm, as
//     core/train/optimizer.cc's GlobalNorm and Update): with clipnorm > 0,
//     each gradient is then scaled by float(clipnorm / norm) when norm =
//     sqrt(*sum_squares) * unscale > clipnorm.
// With skip_nonfinite, the whole update is skipped when GradientsOverflowed
// (kernels/cuda/overflow.h) says so.
struct GradientClip {
  double clipnorm = 0;  // 0: no clipping
  const double* sum_squares = nullptr;
  float unscale = 1.0f;
  bool skip_nonfinite = false;
};

struct SgdStep {
  float lr = 0;
  float momentum = 0;
  bool nesterov = false;
  float decay_factor = 0;  // weight_decay * lr, in the runs with decay
  GradientClip clip;
};

struct AdamStep {
  float alpha = 0;  // lr * sqrt(1 - beta_2^t) / (1 - beta_1^t), t = iter + 1
  float one_minus_b1 = 0;
  float one_minus_b2 = 0;
  float eps = 0;
  float decay_factor = 0;  // weight_decay * lr, in the runs with decay
  GradientClip clip;
};

inline SgdStep MakeSgdStep(double lr, double momentum, bool nesterov,
                           double weight_decay) {
  SgdStep s;
  s.lr = static_cast<float>(lr);
  s.momentum = static_cast<float>(momentum);
  s.nesterov = nesterov;
  s.decay_factor = static_cast<float>(weight_decay * lr);
  return s;
}

// `iterations` is Optimizer::iterations() before this step.
inline AdamStep MakeAdamStep(double lr, double beta_1, double beta_2,
                             double epsilon, double weight_decay,
                             int64_t iterations) {
  const double t = static_cast<double>(iterations + 1);
  AdamStep s;
  s.alpha = static_cast<float>(lr * std::sqrt(1.0 - std::pow(beta_2, t)) /
                               (1.0 - std::pow(beta_1, t)));
  s.one_minus_b1 = static_cast<float>(1.0 - beta_1);
  s.one_minus_b2 = static_cast<float>(1.0 - beta_2);
  s.eps = static_cast<float>(epsilon);
  s.decay_factor = static_cast<float>(weight_decay * lr);
  return s;
}

// A run of the flat buffers (GpuModel's params, padding included) for the
// updates below: [begin, end) in floats, updated by the optimizer or not
// (batch norm's statistics, frozen layers: left to others), and with
// weight decay or not (DecaysWeights). A model's runs, in order, tile its
// buffer, so one launch updates every run: the clipping norm and the
// update were two launches per run before (about 140 for the BERT
// example, whose decay changes at every bias and LayerNorm).
struct FlatRun {
  int64_t begin = 0;
  int64_t end = 0;
  int32_t update = 0;  // 1: the optimizer updates it
  int32_t decay = 0;   // 1: weight decay applies (the steps' decay_factor)
};

// One SGD step over every optimizer run of `runs` (a device array of
// `count` runs tiling [0, n)): w -= w * decay_factor in a decayed run,
// then plain SGD when m is null (momentum 0, no slot), else momentum or
// Nesterov on slot m. Enqueues;
// returns the launch error.
cudaError_t SgdUpdate(int64_t n, const FlatRun* runs, int count,
                      const SgdStep& step, float* w, float* m, const float* g,
                      cudaStream_t stream);

// One Adam/AdamW step over every optimizer run, with slots m, v.
cudaError_t AdamUpdate(int64_t n, const FlatRun* runs, int count,
                       const AdamStep& step, float* w, float* m, float* v,
                       const float* g, cudaStream_t stream);

// The global norm's sum of squares in double, in two deterministic passes
// (fixed grids and fixed reduction trees: the same bits on every run and on
// every GPU holding the same gradients). The order differs from the CPU's
// sequential sum only in the last bits of a double, far below the float
// scale it becomes.
inline constexpr int kNormBlocks = 128;

// partials[0, kNormBlocks) = the sums of g[i]^2 over the optimizer runs
// of `runs` (as above), one per block.
cudaError_t SumSquaresPartials(int64_t n, const FlatRun* runs, int count,
                               const float* g, double* partials,
                               cudaStream_t stream);

// *out = partials[0] + ... + partials[count - 1] (one block, fixed tree).
cudaError_t SumPartials(int64_t count, const double* partials, double* out,
                        cudaStream_t stream);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_OPTIMIZER_H_
