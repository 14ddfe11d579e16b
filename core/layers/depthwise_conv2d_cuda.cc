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

// A 16-bit precision's rounded copies of x and the kernel in `ws` (as the
// CPU layer's Rounded; the floats WorkspaceFloats counts), or the inputs
// themselves without one.
struct Inputs {
  const float* x;
  const float* kernel;
};
int64_t RoundedFloats(const DepthwiseConv2DLayer& l, const LayerIO& io,
                      const cuda::DeviceContext& dc) {
  if (dc.conv.inputs == cuda::InputRounding::kNone) return 0;
  return io.n * l.input_size(0) + l.kernel_floats();
}
absl::StatusOr<Inputs> Round(const DepthwiseConv2DLayer& l, const LayerIO& io,
                             const float* kernel, cuda::DeviceContext& dc,
                             float* ws) {
  if (dc.conv.inputs == cuda::InputRounding::kNone)
    return Inputs{io.x[0], kernel};
  const int64_t nx = io.n * l.input_size(0);
  CUDA_RETURN_IF_ERROR(
      cuda::RoundInputs(dc.conv.inputs, nx, io.x[0], ws, dc.stream));
  CUDA_RETURN_IF_ERROR(cuda::RoundInputs(dc.conv.inputs, l.kernel_floats(),
                                         kernel, ws + nx, dc.stream));
  return Inputs{ws, ws + nx};
}

absl::Status Forward(Layer& layer, DeviceLayerState*, const LayerIO& io,
                     const PassContext&, cuda::DeviceContext& dc) {
  const auto& l = static_cast<const DepthwiseConv2DLayer&>(layer);
  const Conv2DGeometry g = l.Geometry(io.n);
  ASSIGN_OR_RETURN(const float* kernel,
                   DeviceKerasKernel(l.kernel_layout(), io, dc.stream));
  const int64_t rounded = RoundedFloats(l, io, dc);
  float* ws = nullptr;
  if (rounded > 0) {
    ASSIGN_OR_RETURN(void* p, dc.workspace(rounded * sizeof(float)));
    ws = static_cast<float*>(p);
  }
  ASSIGN_OR_RETURN(const Inputs in, Round(l, io, kernel, dc, ws));
  CUDA_RETURN_IF_ERROR(cuda::DepthwiseConv2DForward(
      g, in.x, in.kernel, l.config().use_bias ? io.w[1] : nullptr, io.y,
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
  const int64_t rounded = RoundedFloats(l, io, dc);
  ASSIGN_OR_RETURN(void* ws,
                   dc.workspace(std::max<size_t>(
                       {bias_ws, rounded * sizeof(float), size_t{4}})));
  CUDA_RETURN_IF_ERROR(cuda::ActivationBackwardBiasGrad(
      g.rows(), g.filters, l.Act(), io.y, io.dy,
      l.config().use_bias ? io.dw[1] : nullptr, dc.stream,
      static_cast<float*>(ws)));
  ASSIGN_OR_RETURN(const float* kernel,
                   DeviceKerasKernel(l.kernel_layout(), io, dc.stream));
  // 16-bit inputs: dy rounded in place (the bias has its float32 gradient
  // already), x and the kernel into the workspace the bias sums are done
  // with (the stream orders them).
  CUDA_RETURN_IF_ERROR(cuda::RoundInputs(dc.conv.inputs, g.rows() * g.filters,
                                         io.dy, io.dy, dc.stream));
  ASSIGN_OR_RETURN(const Inputs in,
                   Round(l, io, kernel, dc, static_cast<float*>(ws)));
  CUDA_RETURN_IF_ERROR(cuda::DepthwiseConv2DBackward(
      g, in.x, in.kernel, io.dy, DeviceKerasGrad(l.kernel_layout(), io),
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
