// max_pool2d, average_pooling2d, global_average_pooling2d, flatten and
// dropout on a GPU: the CPU's masks and argmax semantics, through
// kernels/cuda (the argmax in the layer's scratch); the pooling means in the
// CPU's order.
#include "base/status_macros.h"
#include "core/layers/device_layer.h"
#include "core/layers/simple_layers.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/layers/conv_transform.h"
#include "kernels/cuda/layers/device_context.h"
#include "kernels/cuda/layers/dropout.h"
#include "kernels/cuda/pool.h"

namespace lockstep {
namespace {

DeviceLayer Pool() {
  DeviceLayer d;
  d.scratch_bytes = [](const Layer& l, int64_t n) -> int64_t {
    return n * l.output_size() * sizeof(int32_t);
  };
  d.forward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                 const PassContext&, cuda::DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const MaxPool2DLayer&>(layer);
    CUDA_RETURN_IF_ERROR(
        cuda::MaxPool2DForward(l.Geometry(io.n), io.x[0], io.y,
                               static_cast<int32_t*>(io.scratch), dc.stream));
    return absl::OkStatus();
  };
  d.backward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                  const PassContext&, cuda::DeviceContext& dc) -> absl::Status {
    if (io.dx[0] == nullptr) return absl::OkStatus();
    const auto& l = static_cast<const MaxPool2DLayer&>(layer);
    CUDA_RETURN_IF_ERROR(cuda::MaxPool2DBackward(
        l.Geometry(io.n), io.dy, static_cast<const int32_t*>(io.scratch),
        io.dx[0], dc.stream));
    return absl::OkStatus();
  };
  return d;
}

DeviceLayer AvgPool() {
  DeviceLayer d;
  d.forward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                 const PassContext&, cuda::DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const AvgPool2DLayer&>(layer);
    CUDA_RETURN_IF_ERROR(cuda::AvgPool2DForward(
        l.Geometry(io.n), l.count_include_pad(), io.x[0], io.y, dc.stream));
    return absl::OkStatus();
  };
  d.backward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                  const PassContext&, cuda::DeviceContext& dc) -> absl::Status {
    if (io.dx[0] == nullptr) return absl::OkStatus();
    const auto& l = static_cast<const AvgPool2DLayer&>(layer);
    CUDA_RETURN_IF_ERROR(cuda::AvgPool2DBackward(
        l.Geometry(io.n), l.count_include_pad(), io.dy, io.dx[0], dc.stream));
    return absl::OkStatus();
  };
  return d;
}

DeviceLayer GlobalAvgPool() {
  DeviceLayer d;
  d.forward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                 const PassContext&, cuda::DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const GlobalAvgPool2DLayer&>(layer);
    CUDA_RETURN_IF_ERROR(cuda::GlobalAvgPool2DForward(
        io.n, l.positions(), l.channels(), io.x[0], io.y, dc.stream));
    return absl::OkStatus();
  };
  d.backward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                  const PassContext&, cuda::DeviceContext& dc) -> absl::Status {
    if (io.dx[0] == nullptr) return absl::OkStatus();
    const auto& l = static_cast<const GlobalAvgPool2DLayer&>(layer);
    CUDA_RETURN_IF_ERROR(cuda::GlobalAvgPool2DBackward(
        io.n, l.positions(), l.channels(), io.dy, io.dx[0], dc.stream));
    return absl::OkStatus();
  };
  return d;
}

// Flatten passes its input through unless it flattens channels first
// (param_names "torch"): then the CPU's transpose.
DeviceLayer Flatten() {
  DeviceLayer d;
  d.forward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                 const PassContext&, cuda::DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const FlattenLayer&>(layer);
    CUDA_RETURN_IF_ERROR(cuda::NhwcToNchw(io.n, l.positions(), l.channels(),
                                          io.x[0], io.y, dc.stream));
    return absl::OkStatus();
  };
  d.backward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                  const PassContext&, cuda::DeviceContext& dc) -> absl::Status {
    if (io.dx[0] == nullptr) return absl::OkStatus();
    const auto& l = static_cast<const FlattenLayer&>(layer);
    CUDA_RETURN_IF_ERROR(cuda::NchwToNhwc(io.n, l.positions(), l.channels(),
                                          io.dy, io.dx[0], dc.stream));
    return absl::OkStatus();
  };
  return d;
}

DeviceLayer Dropout() {
  DeviceLayer d;
  d.forward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                 const PassContext& ctx,
                 cuda::DeviceContext& dc) -> absl::Status {
    const auto& l = static_cast<const DropoutLayer&>(layer);
    CUDA_RETURN_IF_ERROR(cuda::DropoutForward(io.n * l.input_size(), l.rate(),
                                              ctx.dropout_seed, io.x[0], io.y,
                                              dc.stream));
    return absl::OkStatus();
  };
  d.backward = [](Layer& layer, DeviceLayerState*, const LayerIO& io,
                  const PassContext& ctx,
                  cuda::DeviceContext& dc) -> absl::Status {
    if (io.dx[0] == nullptr) return absl::OkStatus();
    const auto& l = static_cast<const DropoutLayer&>(layer);
    CUDA_RETURN_IF_ERROR(cuda::DropoutBackward(io.n * l.input_size(), l.rate(),
                                               ctx.dropout_seed, io.dy,
                                               io.dx[0], dc.stream));
    return absl::OkStatus();
  };
  return d;
}

LOCKSTEP_REGISTER_DEVICE_LAYER(max_pool2d, "max_pool2d", Pool());
LOCKSTEP_REGISTER_DEVICE_LAYER(average_pooling2d, "average_pooling2d",
                               AvgPool());
LOCKSTEP_REGISTER_DEVICE_LAYER(global_average_pooling2d,
                               "global_average_pooling2d", GlobalAvgPool());
LOCKSTEP_REGISTER_DEVICE_LAYER(flatten, "flatten", Flatten());
LOCKSTEP_REGISTER_DEVICE_LAYER(dropout, "dropout", Dropout());

}  // namespace
}  // namespace lockstep
