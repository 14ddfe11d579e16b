// The GPUs this process can use, and a worker's device list resolved against
// them. With no usable GPU (no driver, old driver, no device) the query says
// why in words instead of failing later inside a kernel launch.
#ifndef LOCKSTEP_KERNELS_CUDA_DEVICE_H_
#define LOCKSTEP_KERNELS_CUDA_DEVICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cuda/device_list.h"

namespace lockstep {
namespace cuda {

// The kernels are built for sm_90 (plus compute_90 PTX): older GPUs cannot
// run them.
inline constexpr int kMinComputeCapability = 90;  // major * 10 + minor

struct DeviceInfo {
  int ordinal = 0;  // the cuda:N index (after CUDA_VISIBLE_DEVICES)
  std::string name;
  int64_t total_memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  std::string pci_bus_id;  // "0000:3b:00.0"

  int compute_capability() const { return compute_major * 10 + compute_minor; }
  // "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB, 132 SMs, 0000:3b:00.0)"
  std::string ToString() const;
};

// Every GPU the CUDA runtime sees; blocks while the driver initializes (the
// first call can take seconds). kFailedPrecondition when none is usable:
// "no usable CUDA device: CUDA driver is older than the runtime or missing
// (cudaErrorInsufficientDriver, error 35)".
absl::StatusOr<std::vector<DeviceInfo>> VisibleDevices();

// The reason text VisibleDevices gives for a failed device count (exposed
// for tests: no device is needed to check it).
std::string NoDeviceReason(int cuda_error);

// ParseDeviceList(spec) against the visible GPUs; an empty spec falls back to
// `fallback` when there are none. A list naming GPUs fails with the reason
// none is usable, or names a GPU older than kMinComputeCapability.
absl::StatusOr<DeviceList> ResolveDeviceList(absl::string_view spec,
                                             const DeviceList& fallback);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_DEVICE_H_
