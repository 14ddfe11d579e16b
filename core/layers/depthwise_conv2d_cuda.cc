// depthwise_conv2d on a GPU: kernels/cuda/layers/depthwise.h (the CPU's
// bits), then the activation; its backward and the bias gradient first. A
// PyTorch-layout kernel is converted in the layer's scratch, as conv2d's.
#include <algorithm>

#include "core/layers/depthwise_conv2d.h"
#include "core/layers/device_layer.h"
#include "core/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/layers/activation.h"
#include "kernels/cuda/layers/conv_transform.h"
#include "kernels/cuda/layers/depthwise.h"
#include "kernels/cuda/layers/device_context.h"

namespace lockstep {
namespace {

int64_t KernelFloats(const DepthwiseConv2DLayer& l) {
  return l.config().kernel_h * l.config().kernel_w * l.output_shape()[2];
}

absl::StatusOr<const float*> KerasKernel(const DepthwiseConv2DLayer& l,
                                         const LayerIO& io,
                                         cuda::DeviceContext& dc) {
  if (!l.torch_layout()) return io.w[0];
  float* keras = static_cast<float*>(io.scratch);
  CUDA_RETURN_IF_ERROR(cuda::TorchToKerasConvKernel(
      l.output_shape()[2], 1, l.config().kernel_h * l.config().kernel_w,
      io.w[0], keras, dc.stream));
  return keras;
}

absl::Status Forward(Layer& layer, DeviceLayerState*, const LayerIO& io,
                     const PassContext&, cuda::DeviceContext& dc) {
  const auto& l = static_cast<const DepthwiseConv2DLayer&>(layer);
  const Conv2DGeometry g = l.Geometry(io.n);
  ASSIGN_OR_RETURN(const float* kernel, KerasKernel(l, io, dc));
  CUDA_RETURN_IF_ERROR(cuda::DepthwiseConv2DForward(
      g, io.x[0], kernel, l.config().use_bias ? io.w[1] : nullptr, io.y,
      dc.stream));
  CUDA_RETURN_IF_ERROR(cuda::BiasActivationForward(
      g.rows(), g.filters, nullptr, l.Act(), io.y, dc.stream));
  return absl::OkStatus();
}

absl::Status Backward(Layer& layer, DeviceLayerState*, const LayerIO& io,
                      const PassContext&, cuda::DeviceContext& dc) {
  const auto& l = static_cast<const DepthwiseConv2DLayer&>(layer);
  const Conv2DGeometry g = l.Geometry(io.n);
  const size_t bias_ws =
      cuda::BiasGradWorkspaceFloats(g.rows(), g.filters) * sizeof(float);
  ASSIGN_OR_RETURN(void* ws, dc.workspace(std::max<size_t>(bias_ws, 4)));
  CUDA_RETURN_IF_ERROR(cuda::ActivationBackwardBiasGrad(
      g.rows(), g.filters, l.Act(), io.y, io.dy,
      l.config().use_bias ? io.dw[1] : nullptr, dc.stream,
      static_cast<float*>(ws)));
  ASSIGN_OR_RETURN(const float* kernel, KerasKernel(l, io, dc));
  float* dkernel = l.torch_layout()
                       ? static_cast<float*>(io.scratch) + KernelFloats(l)
                       : io.dw[0];
  CUDA_RETURN_IF_ERROR(cuda::DepthwiseConv2DBackward(
      g, io.x[0], kernel, io.dy, dkernel, io.dx[0], dc.stream));
  if (l.torch_layout()) {
    CUDA_RETURN_IF_ERROR(cuda::KerasToTorchConvKernel(
        g.filters, 1, l.config().kernel_h * l.config().kernel_w, dkernel,
        io.dw[0], dc.stream));
  }
  return absl::OkStatus();
}

DeviceLayer Impl() {
  DeviceLayer d;
  d.scratch_bytes = [](const Layer& layer, int64_t) -> int64_t {
    const auto& l = static_cast<const DepthwiseConv2DLayer&>(layer);
    return l.torch_layout() ? 2 * KernelFloats(l) * sizeof(float) : 0;
  };
  d.forward = &Forward;
  d.backward = &Backward;
  return d;
}

LOCKSTEP_REGISTER_DEVICE_LAYER(depthwise_conv2d, "depthwise_conv2d", Impl());

}  // namespace
}  // namespace lockstep
