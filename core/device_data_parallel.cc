// The NCCL data path's registration (see device_data_parallel.h).
#include "core/device_data_parallel.h"

#include <mutex>

namespace lockstep {
namespace {

std::mutex& Mu() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

DeviceDataParallelBackend& Backend() {
  static DeviceDataParallelBackend* b = new DeviceDataParallelBackend;
  return *b;
}

constexpr char kNoNccl[] =
    "the NCCL all-reduce needs the GPU build of lockstep (--config=cuda)";

}  // namespace

void RegisterDeviceDataParallel(DeviceDataParallelBackend backend) {
  std::lock_guard<std::mutex> lock(Mu());
  Backend() = std::move(backend);
}

bool HaveDeviceDataParallel() {
  std::lock_guard<std::mutex> lock(Mu());
  return static_cast<bool>(Backend().make);
}

absl::StatusOr<std::unique_ptr<DeviceDataParallel>> MakeDeviceDataParallel(
    const DeviceDataParallelConfig& config) {
  DeviceDataParallelBackend b;
  {
    std::lock_guard<std::mutex> lock(Mu());
    b = Backend();
  }
  if (!b.make) return absl::FailedPreconditionError(kNoNccl);
  return b.make(config);
}

absl::StatusOr<std::string> NewNcclId() {
  DeviceDataParallelBackend b;
  {
    std::lock_guard<std::mutex> lock(Mu());
    b = Backend();
  }
  if (!b.new_nccl_id) return absl::FailedPreconditionError(kNoNccl);
  return b.new_nccl_id();
}

}  // namespace lockstep
