// Layout changes around cuDNN's convolution: the Keras kernel layout
// [KH, KW, C, F] to and from cuDNN's NHWC filter layout [F, KH, KW, C], and
// NHWC zero padding (and its adjoint, cropping) for TF's asymmetric 'same'
// padding, which cuDNN's symmetric padding cannot express. Each call enqueues
// on `stream` and returns the launch error (cudaSuccess for empty input).
#ifndef LOCKSTEP_KERNELS_CUDA_LAYERS_CONV_TRANSFORM_H_
#define LOCKSTEP_KERNELS_CUDA_LAYERS_CONV_TRANSFORM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lockstep {
namespace cuda {

// out [F, KHW*C] from in [KHW*C, F] (a plain matrix transpose).
cudaError_t KerasToCudnnFilter(int64_t khwc, int64_t filters, const float* in,
                               float* out, cudaStream_t stream);
// out [KHW*C, F] from in [F, KHW*C].
cudaError_t CudnnToKerasFilter(int64_t khwc, int64_t filters, const float* in,
                               float* out, cudaStream_t stream);

// PyTorch's kernel layout [F, C, KH*KW] to Keras' [KH*KW, C, F] and back,
// as kernels/cpu/conv.h's TorchToKerasConvKernel / KerasToTorchConvKernel
// (param_names "torch"; a depthwise kernel is c = 1, f = C*M).
cudaError_t TorchToKerasConvKernel(int64_t f, int64_t c, int64_t khw,
                                   const float* torch, float* keras,
                                   cudaStream_t stream);
cudaError_t KerasToTorchConvKernel(int64_t f, int64_t c, int64_t khw,
                                   const float* keras, float* torch,
                                   cudaStream_t stream);

// Feature maps NHWC to NCHW and back, as kernels/cpu/conv.h's NhwcToNchw /
// NchwToNhwc (flatten under param_names "torch").
cudaError_t NhwcToNchw(int64_t n, int64_t hw, int64_t c, const float* x,
                       float* y, cudaStream_t stream);
cudaError_t NchwToNhwc(int64_t n, int64_t hw, int64_t c, const float* x,
                       float* y, cudaStream_t stream);

// out [N, H + top + bottom, W + left + right, C] = x [N, H, W, C] surrounded
// by zeros (bottom/right are whatever is left of the output's size).
cudaError_t PadNhwc(int64_t n, int64_t h, int64_t w, int64_t c, int64_t top,
                    int64_t left, int64_t out_h, int64_t out_w, const float* x,
                    float* out, cudaStream_t stream);
// The adjoint: dx [N, H, W, C] = the interior of padded [N, out_h, out_w, C]
// at offset (top, left).
cudaError_t CropNhwc(int64_t n, int64_t h, int64_t w, int64_t c, int64_t top,
                     int64_t left, int64_t out_h, int64_t out_w,
                     const float* padded, float* dx, cudaStream_t stream);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_LAYERS_CONV_TRANSFORM_H_
