// Inverted dropout on the GPU with kernels/cpu/dropout.h's mask, a pure
// function of (seed, element index): the same seed drops the same units on
// the CPU and the GPU, and the outputs are the CPU's bit for bit.
#ifndef LOCKSTEP_KERNELS_CUDA_LAYERS_DROPOUT_H_
#define LOCKSTEP_KERNELS_CUDA_LAYERS_DROPOUT_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lockstep {
namespace cuda {

// y[i] = keep(i) ? x[i] / (1 - rate) : 0 (times the float 1 / (1 - rate), as
// the CPU), for i in [0, n). rate in [0, 1). x may equal y. Enqueues on
// `stream`; returns the launch error.
cudaError_t DropoutForward(int64_t n, float rate, uint64_t seed, const float* x,
                           float* y, cudaStream_t stream);
// dx[i] = keep(i) ? dy[i] / (1 - rate) : 0, the same mask. dx may be dy.
cudaError_t DropoutBackward(int64_t n, float rate, uint64_t seed,
                            const float* dy, float* dx, cudaStream_t stream);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_LAYERS_DROPOUT_H_
