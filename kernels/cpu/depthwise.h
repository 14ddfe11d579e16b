// NHWC depthwise 2-D convolution (Keras DepthwiseConv2D, torch Conv2d with
// groups = in_channels): each input channel c has its own multiplier M
// filters, output channel c * M + m. The kernel is Keras' [KH, KW, C, M].
// Direct loops (the channel axis innermost), no im2col. Every sum has a
// fixed order, independent of the thread count, and kernels/cuda/layers/
// depthwise.h follows the same order (the same bits).
#ifndef LOCKSTEP_KERNELS_CPU_DEPTHWISE_H_
#define LOCKSTEP_KERNELS_CPU_DEPTHWISE_H_

#include <cstdint>
#include <vector>

#include "kernels/cpu/conv.h"

namespace lockstep {

// Rows (output pixels) per block of the kernel gradient: each block is
// summed in row order, then the blocks in block order.
inline constexpr int64_t kDepthwiseRowBlock = 256;

// g.filters = g.in_c * M. y [N, OH, OW, C*M] = bias + the window sums (bias
// may be null); no activation (the layer applies it, as for conv2d).
// Window taps are added in (kh, kw) order.
void DepthwiseConv2DForward(const Conv2DGeometry& g, const float* x,
                            const float* kernel, const float* bias, float* y);

// Given dy [N, OH, OW, C*M] (after the activation's backward), overwrites
// dkernel [KH, KW, C, M] and dx [N, H, W, C] (when not null). `partials`
// is scratch reused across calls.
void DepthwiseConv2DBackward(const Conv2DGeometry& g, const float* x,
                             const float* kernel, const float* dy,
                             float* dkernel, float* dx,
                             std::vector<float>* partials);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CPU_DEPTHWISE_H_
