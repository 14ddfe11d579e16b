// depthwise_conv2d on a GPU: kernels/cuda/layers/depthwise.h (the CPU's
// bits), then the activation; its backward and the bias gradient first. A
// PyTorch-layout kernel is converted in the layer's scratch, as conv2d's.
#include <algorithm>

#include "base/status_macros.h"
#include "core/layers/conv_kernel_layout_cuda.h"
#include "core/layers/depthwise_conv2d.h"
#include "core/layers/device_layer.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/layers/activation.h"
#include "kernels/cuda/layers/depthwise.h"
#include "kernels/cuda/layers/device_context.h"

namespace lockstep {
namespace {

absl::Status Forward(Layer& layer, DeviceLayerState*, const LayerIO& io,
                     const PassContext&, cuda::DeviceContext& dc) {
  const auto& l = static_cast<const DepthwiseConv2DLayer&>(layer);
  const Conv2DGeometry g = l.Geometry(io.n);
  ASSIGN_OR_RETURN(const float* kernel,
                   DeviceKerasKernel(l.kernel_layout(), io, dc.stream));
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
  ASSIGN_OR_RETURN(const float* kernel,
                   DeviceKerasKernel(l.kernel_layout(), io, dc.stream));
  CUDA_RETURN_IF_ERROR(cuda::DepthwiseConv2DBackward(
      g, io.x[0], kernel, io.dy, DeviceKerasGrad(l.kernel_layout(), io),
      io.dx[0], dc.stream));
  return DeviceFinishGrad(l.kernel_layout(), io, dc.stream);
}

DeviceLayer Impl() {
  DeviceLayer d;
  d.scratch_bytes = [](const Layer& layer, int64_t) -> int64_t {
    return ConvKernelScratchBytes(
        static_cast<const DepthwiseConv2DLayer&>(layer).kernel_layout());
  };
  d.forward = &Forward;
  d.backward = &Backward;
  return d;
}

LOCKSTEP_REGISTER_DEVICE_LAYER(depthwise_conv2d, "depthwise_conv2d", Impl());

}  // namespace
}  // namespace lockstep
