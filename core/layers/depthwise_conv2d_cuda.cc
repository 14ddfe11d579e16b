// depthwise_conv2d on a GPU: kernels/cuda/layers/depthwise.h (the CPU's
// bits), then the activation; its backward and the bias gradient first.
#include <algorithm>

#include "core/layers/depthwise_conv2d.h"
#include "core/layers/device_layer.h"
#include "core/status_macros.h"
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
  CUDA_RETURN_IF_ERROR(cuda::DepthwiseConv2DForward(
      g, io.x[0], io.w[0], l.config().use_bias ? io.w[1] : nullptr, io.y,
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
  CUDA_RETURN_IF_ERROR(cuda::DepthwiseConv2DBackward(
      g, io.x[0], io.w[0], io.dy, io.dw[0], io.dx[0], dc.stream));
  return absl::OkStatus();
}

DeviceLayer Impl() {
  DeviceLayer d;
  d.forward = &Forward;
  d.backward = &Backward;
  return d;
}

LOCKSTEP_REGISTER_DEVICE_LAYER(depthwise_conv2d, "depthwise_conv2d", Impl());

}  // namespace
}  // namespace lockstep
