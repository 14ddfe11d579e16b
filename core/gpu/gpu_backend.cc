// Registers the CUDA build's GPU backend (core/train/gpu_backend.h) before main:
// the GPU data path, NCCL ids and the device count. The binary links
// this library (alwayslink) only under --config=cuda.
#include "core/train/gpu_backend.h"

#include "base/status_macros.h"
#include "core/gpu/gpu_replicas_cuda.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/nccl_communicator.h"

namespace lockstep {
namespace cuda {
namespace {

absl::StatusOr<int> CountVisible() {
  ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, VisibleDevices());
  return static_cast<int>(devices.size());
}

const bool kRegistered = [] {
  GpuBackend b;
  b.visible_devices = &CountVisible;
  b.make_replicas = &MakeCudaGpuReplicas;
  b.new_nccl_id = &NewNcclUniqueId;
  RegisterGpuBackend(std::move(b));
  return true;
}();

}  // namespace
}  // namespace cuda
}  // namespace lockstep
