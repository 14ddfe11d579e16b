// GELU (exact, erf) on the GPU: kernels/cpu/gelu.h's semantics with CUDA's
// erff/expf (agreeing with the CPU's approximations to ~1e-6).
#ifndef LOCKSTEP_KERNELS_CUDA_GELU_H_
#define LOCKSTEP_KERNELS_CUDA_GELU_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lockstep {
namespace cuda {

// y[i] = gelu(x[i]); x may equal y. Enqueues on `stream`; returns the
// launch error.
cudaError_t GeluForward(int64_t n, const float* x, float* y,
                        cudaStream_t stream);
// dx[i] = dy[i] * gelu'(x[i]); dx may equal dy.
cudaError_t GeluBackward(int64_t n, const float* x, const float* dy, float* dx,
                         cudaStream_t stream);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_GELU_H_
