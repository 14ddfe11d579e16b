// The CUDA side of the layer vocabulary: a layer type's device forward and
// backward, registered from its CUDA file (core/layers/*.cu or *_cuda.cc),
// which only the --config=cuda build compiles and only the GPU backend
// links. The GPU executor (core/gpu/gpu_model.h) looks a layer's up by type.
// Plain C++: the CUDA types are only declared here.
#ifndef LOCKSTEP_CORE_LAYERS_DEVICE_LAYER_H_
#define LOCKSTEP_CORE_LAYERS_DEVICE_LAYER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/layers/layer.h"

namespace lockstep {
namespace cuda {
struct DeviceContext;
}  // namespace cuda

// Per-layer state a device implementation keeps across calls (cuDNN plans).
class DeviceLayerState {
 public:
  virtual ~DeviceLayerState() = default;
};

struct DeviceLayer {
  // Whether this layer's configuration has a device path; checked when a
  // GPU model is built (may be null: always).
  std::function<absl::Status(const Layer&)> supports;
  // Per-node state, made once (may be null).
  std::function<std::unique_ptr<DeviceLayerState>(const Layer&)> make_state;
  // Device scratch kept from a forward to the backward of the same pass
  // (LayerIO::scratch), for n samples; may be null (none).
  std::function<int64_t(const Layer&, int64_t n)> scratch_bytes;
  // Layer::Forward and Backward's contracts, with device pointers in the
  // LayerIO; the work is enqueued on the context's stream (no waiting).
  std::function<absl::Status(Layer&, DeviceLayerState*, const LayerIO&,
                             const PassContext&, cuda::DeviceContext&)>
      forward, backward;
};

bool RegisterDeviceLayer(const std::string& type, DeviceLayer impl);
// Null when the type has no CUDA implementation (or this is not the CUDA
// build's GPU backend).
const DeviceLayer* FindDeviceLayer(absl::string_view type);

#define LOCKSTEP_REGISTER_DEVICE_LAYER(id, type, expr)            \
  static const bool lockstep_device_layer_##id [[maybe_unused]] = \
      ::lockstep::RegisterDeviceLayer(type, expr)

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_LAYERS_DEVICE_LAYER_H_
