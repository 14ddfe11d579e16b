// conv2d on a GPU: a cuDNN plan per batch size (deterministic algorithms),
// the bias and activation fused after, the shared workspace for both. A
// PyTorch-layout kernel (param_names "torch") is converted to Keras' in the
// layer's scratch first, and its gradient back. groups > 1 is cuDNN's
// group count on the whole layer's tensors.
#include <map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/layers/conv2d.h"
#include "core/layers/conv_kernel_layout_cuda.h"
#include "core/layers/device_layer.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/layers/activation.h"
#include "kernels/cuda/layers/conv.h"
#include "kernels/cuda/layers/device_context.h"

namespace lockstep {
namespace {

struct Plans : DeviceLayerState {
  std::map<int64_t, cuda::CudnnConv2D> by_batch;
};

absl::StatusOr<const cuda::CudnnConv2D*> Plan(const Conv2DLayer& l,
                                              DeviceLayerState* state,
                                              int64_t n,
                                              cuda::DeviceContext& dc) {
  auto& plans = static_cast<Plans*>(state)->by_batch;
  auto it = plans.find(n);
  if (it == plans.end()) {
    ASSIGN_OR_RETURN(
        cuda::CudnnConv2D plan,
        cuda::CudnnConv2D::Create(*dc.cudnn, l.Geometry(n), dc.conv,
                                  l.config().groups));
    it = plans.emplace(n, std::move(plan)).first;
  }
  return &it->second;
}

absl::Status Forward(Layer& layer, DeviceLayerState* state, const LayerIO& io,
                     const PassContext& ctx, cuda::DeviceContext& dc) {
  const Conv2DLayer& l = static_cast<const Conv2DLayer&>(layer);
  ASSIGN_OR_RETURN(const cuda::CudnnConv2D* plan, Plan(l, state, io.n, dc));
  ASSIGN_OR_RETURN(const float* kernel,
                   DeviceKerasKernel(l.kernel_layout(), io, dc.stream));
  ASSIGN_OR_RETURN(void* ws, dc.workspace(plan->workspace_bytes()));
  return plan->Forward(*dc.cudnn, dc.stream, io.x[0], kernel,
                       l.config().use_bias ? io.w[1] : nullptr, l.Act(ctx),
                       io.y, ws);
}

absl::Status Backward(Layer& layer, DeviceLayerState* state, const LayerIO& io,
                      const PassContext& ctx, cuda::DeviceContext& dc) {
  const Conv2DLayer& l = static_cast<const Conv2DLayer&>(layer);
  ASSIGN_OR_RETURN(const cuda::CudnnConv2D* plan, Plan(l, state, io.n, dc));
  const Conv2DGeometry g = l.Geometry(io.n);
  // One buffer serves the bias gradient's blocks, then cuDNN (stream order).
  const size_t bias_ws =
      cuda::BiasGradWorkspaceFloats(g.rows(), g.filters) * sizeof(float);
  ASSIGN_OR_RETURN(void* ws, dc.workspace(std::max(std::max<size_t>(bias_ws, 4),
                                                   plan->workspace_bytes())));
  CUDA_RETURN_IF_ERROR(cuda::ActivationBackwardBiasGrad(
      g.rows(), g.filters, l.Act(ctx), io.y, io.dy,
      l.config().use_bias ? io.dw[1] : nullptr, dc.stream,
      static_cast<float*>(ws)));
  ASSIGN_OR_RETURN(const float* kernel,
                   DeviceKerasKernel(l.kernel_layout(), io, dc.stream));
  RETURN_IF_ERROR(plan->Backward(*dc.cudnn, dc.stream, io.x[0], kernel, io.dy,
                                 DeviceKerasGrad(l.kernel_layout(), io),
                                 nullptr, io.dx[0], ws));
  return DeviceFinishGrad(l.kernel_layout(), io, dc.stream);
}

DeviceLayer Impl() {
  DeviceLayer d;
  d.supports = [](const Layer& layer) -> absl::Status {
    const Conv2DConfig& c = static_cast<const Conv2DLayer&>(layer).config();
    if (c.dil_h == 1 && c.dil_w == 1) return absl::OkStatus();
    return absl::UnimplementedError(absl::StrCat(
        "conv2d ", layer.name(), ": dilation_rate [", c.dil_h, ", ", c.dil_w,
        "] has no CUDA path yet; train this model on CPUs"));
  };
  d.make_state = [](const Layer&) -> std::unique_ptr<DeviceLayerState> {
    return std::make_unique<Plans>();
  };
  // Torch layout: the Keras-layout kernel and its gradient.
  d.scratch_bytes = [](const Layer& layer, int64_t) -> int64_t {
    return ConvKernelScratchBytes(
        static_cast<const Conv2DLayer&>(layer).kernel_layout());
  };
  d.forward = &Forward;
  d.backward = &Backward;
  return d;
}

LOCKSTEP_REGISTER_DEVICE_LAYER(conv2d, "conv2d", Impl());

}  // namespace
}  // namespace lockstep
