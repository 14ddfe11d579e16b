// VisibleDevices and ResolveDeviceList over the CUDA runtime.
#include "kernels/cuda/device.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep {
namespace cuda {

std::string DeviceInfo::ToString() const {
  return absl::StrFormat("cuda:%d %s (sm_%d%d, %.1f GiB, %d SMs, %s)", ordinal,
                         name, compute_major, compute_minor,
                         total_memory_bytes / (1024.0 * 1024.0 * 1024.0),
                         multiprocessors, pci_bus_id);
}

std::string NoDeviceReason(int cuda_error) {
  const auto err = static_cast<cudaError_t>(cuda_error);
  std::string words;
  switch (err) {
    case cudaErrorInsufficientDriver:
      words = "CUDA driver is older than the runtime or missing";
      break;
    case cudaErrorNoDevice:
      words = "the driver sees no CUDA-capable device";
      break;
    case cudaErrorStubLibrary:
      words = "libcuda.so is the toolkit's stub, no real driver is installed";
      break;
    case cudaErrorSystemDriverMismatch:
      words = "the kernel module and libcuda.so are different driver versions";
      break;
    case cudaErrorCompatNotSupportedOnDevice:
      words = "the forward-compatibility driver does not support this GPU";
      break;
    case cudaErrorSystemNotReady:
      words = "the system is not ready (fabric manager or driver starting)";
      break;
    default:
      words = cudaGetErrorString(err);
      break;
  }
  return absl::StrCat("no usable CUDA device: ", words, " (",
                      cudaGetErrorName(err), ", error ", cuda_error, ")");
}

absl::StatusOr<std::vector<DeviceInfo>> VisibleDevices() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it so later calls do not report it again
    return absl::FailedPreconditionError(NoDeviceReason(err));
  }
  if (count == 0) {
    return absl::FailedPreconditionError(
        "no usable CUDA device: the driver reports 0 devices (is "
        "CUDA_VISIBLE_DEVICES empty?)");
  }
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop;
    const cudaError_t perr = cudaGetDeviceProperties(&prop, i);
    if (perr != cudaSuccess) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cudaGetDeviceProperties(cuda:", i,
          ") failed: ", cudaGetErrorString(perr), " (", cudaGetErrorName(perr),
          ", error ", static_cast<int>(perr), ")"));
    }
    DeviceInfo info;
    info.ordinal = i;
    info.name = prop.name;
    info.total_memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.multiprocessors = prop.multiProcessorCount;
    info.pci_bus_id = absl::StrFormat("%04x:%02x:%02x.0", prop.pciDomainID,
                                      prop.pciBusID, prop.pciDeviceID);
    devices.push_back(std::move(info));
  }
  return devices;
}

absl::StatusOr<DeviceList> ResolveDeviceList(absl::string_view spec,
                                             const DeviceList& fallback) {
  absl::StatusOr<std::vector<DeviceInfo>> devices = VisibleDevices();
  const int visible = devices.ok() ? static_cast<int>(devices->size()) : 0;
  absl::StatusOr<DeviceList> list = ParseDeviceList(spec, visible, fallback);
  if (!list.ok()) {
    if (!devices.ok() &&
        list.status().code() == absl::StatusCode::kFailedPrecondition) {
      return absl::FailedPreconditionError(absl::StrCat(
          list.status().message(), ": ", devices.status().message()));
    }
    return list.status();
  }
  if (list->kind == DeviceKind::kCuda) {
    for (int ordinal : list->cuda_ordinals) {
      const DeviceInfo& d = (*devices)[ordinal];
      if (d.compute_capability() < kMinComputeCapability) {
        return absl::FailedPreconditionError(absl::StrCat(
            d.ToString(), " is older than sm_", kMinComputeCapability,
            ", the oldest GPU the kernels are built for"));
      }
    }
  }
  return list;
}

}  // namespace cuda
}  // namespace lockstep
