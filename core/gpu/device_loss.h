// The GPU passes of the losses of core/loss/loss.h, registered by name
// like the layers' (core/layers/device_layer.h): device_losses.cc.
#ifndef LOCKSTEP_CORE_GPU_DEVICE_LOSS_H_
#define LOCKSTEP_CORE_GPU_DEVICE_LOSS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "kernels/cuda/softmax_xent.h"

namespace lockstep {
namespace cuda {

struct DeviceLoss {
  // Device scratch bytes the loss needs for `rows` rows.
  std::function<size_t(int64_t rows)> workspace_bytes;
  // Loss::compute's contract with device pointers: the totals go to
  // `sums` (device); enqueued on `stream`, the launch error returned.
  std::function<cudaError_t(int64_t rows, int64_t outputs, const float* out,
                            const int32_t* labels, float scale, float* grad,
                            void* workspace, DeviceLossSums* sums,
                            cudaStream_t stream)>
      compute;
};

bool RegisterDeviceLoss(const std::string& name, DeviceLoss loss);
// Null when the loss has no GPU pass.
const DeviceLoss* FindDeviceLoss(absl::string_view name);
// The most any registered loss needs for `rows` rows.
size_t DeviceLossWorkspaceBytes(int64_t rows);

#define LOCKSTEP_REGISTER_DEVICE_LOSS(id, name, expr)            \
  static const bool lockstep_device_loss_##id [[maybe_unused]] = \
      ::lockstep::cuda::RegisterDeviceLoss(name, expr)

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_GPU_DEVICE_LOSS_H_
