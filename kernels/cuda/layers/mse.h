// Mean squared error against a sparse label on the GPU, the semantics of
// kernels/cpu/mse.h bit for bit: row loss mean_c (y - t)^2 (summed in double,
// left to right), t = onehot(label) when cols > 1 and t = label when
// cols == 1; gradient (y - t) * (2 * scale / cols); first-argmax accuracy.
// The batch sums are added in row order, as the CPU does. And binary
// cross-entropy from logits (kernels/cpu/bce.h), which shares its row-then-
// sum structure and workspace.
#ifndef LOCKSTEP_KERNELS_CUDA_LAYERS_MSE_H_
#define LOCKSTEP_KERNELS_CUDA_LAYERS_MSE_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/softmax_xent.h"

namespace lockstep {
namespace cuda {

// Device scratch bytes MeanSquaredError needs for `rows` rows.
size_t MeanSquaredErrorWorkspaceBytes(int64_t rows);

// y [rows, cols], labels [rows], device pointers. grad (may alias y) may be
// null. `workspace` holds MeanSquaredErrorWorkspaceBytes(rows); `sums` (device)
// gets the totals (zeros for rows == 0 or cols == 0). Enqueues on `stream`;
// returns the launch error.
cudaError_t MeanSquaredError(int64_t rows, int64_t cols, const float* y,
                             const int32_t* labels, float scale, float* grad,
                             void* workspace, DeviceLossSums* sums,
                             cudaStream_t stream);

// kernels/cpu/bce.h's BinaryCrossEntropy on one logit per row: the same
// prediction counts, gradients and losses up to the last bits of exp and
// log1p (the device's, not glibc's). Workspace:
// MeanSquaredErrorWorkspaceBytes(rows).
cudaError_t BinaryCrossEntropy(int64_t rows, const float* logits,
                               const int32_t* labels, float scale,
                               float* grad, void* workspace,
                               DeviceLossSums* sums, cudaStream_t stream);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_LAYERS_MSE_H_
