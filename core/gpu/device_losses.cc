// The registry of device_loss.h and the losses' GPU passes: the kernels of
// kernels/cuda, in the CPU's semantics (their tests compare the two).
#include <algorithm>
#include <map>
#include <utility>

#include "core/gpu/device_loss.h"
#include "kernels/cuda/layers/mse.h"
#include "kernels/cuda/softmax_xent.h"

namespace lockstep {
namespace cuda {
namespace {

std::map<std::string, DeviceLoss, std::less<>>& Registry() {
  static auto* r = new std::map<std::string, DeviceLoss, std::less<>>;
  return *r;
}

DeviceLoss SparseCategoricalCrossentropy() {
  DeviceLoss d;
  d.workspace_bytes = &SoftmaxCrossEntropyWorkspaceBytes;
  d.compute = [](int64_t rows, int64_t outputs, const float* out,
                 const int32_t* labels, float scale, float* grad, void* ws,
                 DeviceLossSums* sums, cudaStream_t stream) {
    return SoftmaxCrossEntropy(rows, outputs, out, labels, scale, grad, nullptr,
                               ws, sums, stream);
  };
  return d;
}

DeviceLoss Mse() {
  DeviceLoss d;
  d.workspace_bytes = &MeanSquaredErrorWorkspaceBytes;
  d.compute = [](int64_t rows, int64_t outputs, const float* out,
                 const int32_t* labels, float scale, float* grad, void* ws,
                 DeviceLossSums* sums, cudaStream_t stream) {
    return MeanSquaredError(rows, outputs, out, labels, scale, grad, ws, sums,
                            stream);
  };
  return d;
}

DeviceLoss BinaryCrossentropy() {
  DeviceLoss d;
  d.workspace_bytes = &MeanSquaredErrorWorkspaceBytes;  // mse.h's rule
  d.compute = [](int64_t rows, int64_t, const float* out, const int32_t* labels,
                 float scale, float* grad, void* ws, DeviceLossSums* sums,
                 cudaStream_t stream) {
    return BinaryCrossEntropy(rows, out, labels, scale, grad, ws, sums, stream);
  };
  return d;
}

}  // namespace

bool RegisterDeviceLoss(const std::string& name, DeviceLoss loss) {
  return Registry().emplace(name, std::move(loss)).second;
}

const DeviceLoss* FindDeviceLoss(absl::string_view name) {
  auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : &it->second;
}

size_t DeviceLossWorkspaceBytes(int64_t rows) {
  size_t bytes = 256;
  for (const auto& [name, loss] : Registry()) {
    bytes = std::max(bytes, loss.workspace_bytes(rows));
  }
  return bytes;
}

LOCKSTEP_REGISTER_DEVICE_LOSS(sparse_categorical_crossentropy,
                              "sparse_categorical_crossentropy",
                              SparseCategoricalCrossentropy());
LOCKSTEP_REGISTER_DEVICE_LOSS(mse, "mse", Mse());
LOCKSTEP_REGISTER_DEVICE_LOSS(binary_crossentropy, "binary_crossentropy",
                              BinaryCrossentropy());

}  // namespace cuda
}  // namespace lockstep
