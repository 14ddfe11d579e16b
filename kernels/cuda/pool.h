// NHWC 2-D max and average pooling and global average pooling on the GPU
// with the exact semantics of kernels/cpu/pool.h: the same outputs, argmax
// indices (first maximum within the sample's H*W*C values) and input
// gradients, bit for bit.
#ifndef LOCKSTEP_KERNELS_CUDA_POOL_H_
#define LOCKSTEP_KERNELS_CUDA_POOL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/pool.h"

namespace lockstep {
namespace cuda {

// y [N, OH, OW, C] and argmax [N, OH, OW, C] from x [N, H, W, C] (device
// pointers). Enqueues on `stream`; returns the launch error.
cudaError_t MaxPool2DForward(const Pool2DGeometry& g, const float* x, float* y,
                             int32_t* argmax, cudaStream_t stream);

// Overwrites dx [N, H, W, C] with dy routed to the recorded maxima, summed in
// the CPU's order where windows overlap. One thread per input element
// gathers, so no atomics and the result is deterministic.
cudaError_t MaxPool2DBackward(const Pool2DGeometry& g, const float* dy,
                              const int32_t* argmax, float* dx,
                              cudaStream_t stream);

// Average pooling as kernels/cpu/pool.h's AvgPool2DForward/Backward, bit
// for bit: forward one thread per output element summing its window in
// the CPU's order; backward one thread per input element adding
// dy / divisor of the windows that hold it in increasing (oh, ow), the
// order of the CPU's scatter.
cudaError_t AvgPool2DForward(const Pool2DGeometry& g, bool count_include_pad,
                             const float* x, float* y, cudaStream_t stream);
cudaError_t AvgPool2DBackward(const Pool2DGeometry& g, bool count_include_pad,
                              const float* dy, float* dx, cudaStream_t stream);

// y [N, C] = the mean over hw positions of x [N, hw, C]; one thread per
// (sample, channel) sums in position order, as the CPU does.
cudaError_t GlobalAvgPool2DForward(int64_t n, int64_t hw, int64_t c,
                                   const float* x, float* y,
                                   cudaStream_t stream);
// Overwrites dx [N, hw, C] with dy [N, C] / hw.
cudaError_t GlobalAvgPool2DBackward(int64_t n, int64_t hw, int64_t c,
                                    const float* dy, float* dx,
                                    cudaStream_t stream);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_POOL_H_
