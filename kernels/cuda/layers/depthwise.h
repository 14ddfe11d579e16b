// Depthwise 2-D convolution on the GPU with kernels/cpu/depthwise.h's exact
// arithmetic (built with --fmad=false): the same outputs, kernel gradients
// (row blocks of kDepthwiseRowBlock summed in order) and input gradients,
// bit for bit. Direct kernels: one thread per output element forward, per
// kernel element for its gradient, per input element for the input's.
#ifndef LOCKSTEP_KERNELS_CUDA_LAYERS_DEPTHWISE_H_
#define LOCKSTEP_KERNELS_CUDA_LAYERS_DEPTHWISE_H_

#include <cuda_runtime_api.h>

#include "kernels/cpu/conv.h"

namespace lockstep {
namespace cuda {

// y [N, OH, OW, C*M] = bias (may be null) + the window sums; device
// pointers. Enqueues on `stream`; returns the launch error.
cudaError_t DepthwiseConv2DForward(const Conv2DGeometry& g, const float* x,
                                   const float* kernel, const float* bias,
                                   float* y, cudaStream_t stream);

// Overwrites dkernel [KH, KW, C, M] and dx [N, H, W, C] (when not null)
// from dy [N, OH, OW, C*M].
cudaError_t DepthwiseConv2DBackward(const Conv2DGeometry& g, const float* x,
                                    const float* kernel, const float* dy,
                                    float* dkernel, float* dx,
                                    cudaStream_t stream);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_LAYERS_DEPTHWISE_H_
