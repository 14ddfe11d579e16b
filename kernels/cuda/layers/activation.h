// Bias + activation forward and the activation's backward (with the bias
// gradient) on the GPU, the semantics of kernels/cpu/elementwise.h's
// functions of the same names on row-major [rows, cols] device buffers.
// Linear and ReLU forward, and every backward, are the CPU's bit for bit;
// tanh, sigmoid and softmax forward use CUDA's tanhf/expf (a few ulp off).
#ifndef LOCKSTEP_KERNELS_CUDA_LAYERS_ACTIVATION_H_
#define LOCKSTEP_KERNELS_CUDA_LAYERS_ACTIVATION_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/elementwise.h"

namespace lockstep {
namespace cuda {

// In place on y [rows, cols]: y = act(y + bias); bias may be null. Softmax
// is per row (max-subtracted, summed left to right as the CPU). Enqueues on
// `stream`; returns the launch error (cudaSuccess for empty input).
cudaError_t BiasActivationForward(int64_t rows, int64_t cols, const float* bias,
                                  ActivationKind act, float* y,
                                  cudaStream_t stream);

// In place: dy = d(loss)/d(pre-activation) from the activation's output y
// and d(loss)/d(output) in dy; then, when dbias is not null, dbias[c] = sum
// over rows of the result (overwritten; zeros for rows == 0), summed in the
// CPU's fixed order, so deterministic and equal to the CPU's (BiasGrad in
// kernels/cuda/elementwise.h; `bias_workspace`, when not null, holds
// BiasGradWorkspaceFloats(rows, cols) floats for its parallel form).
// Enqueues on `stream`; returns the launch error.
cudaError_t ActivationBackwardBiasGrad(int64_t rows, int64_t cols,
                                       ActivationKind act, const float* y,
                                       float* dy, float* dbias,
                                       cudaStream_t stream,
                                       float* bias_workspace = nullptr);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_LAYERS_ACTIVATION_H_
