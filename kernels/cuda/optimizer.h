// Fused optimizer updates on the GPU with core/train/optimizer.cc's rules
// (kernels/cpu/optimizer_rules.h; built with --fmad=false; sqrt and
// division are IEEE), so a GPU replica's parameters match a CPU replica's
// bit for bit. What each thread does is in optimizer_grid.h (with the
// steps' and runs' types). The step's scalars are computed on the host by
// the Make* functions, as Optimizer::Apply computes them.
#ifndef LOCKSTEP_KERNELS_CUDA_OPTIMIZER_H_
#define LOCKSTEP_KERNELS_CUDA_OPTIMIZER_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/optimizer_grid.h"

namespace lockstep {
namespace cuda {

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
