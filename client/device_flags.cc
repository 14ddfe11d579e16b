// `--devices` resolution (see device_flags.h).
#include "client/device_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/train/gpu_backend.h"

namespace lockstep {

absl::StatusOr<DeviceList> ResolveDevices(const std::string& spec,
                                          int cpu_replicas) {
  const DeviceList cpu = DeviceList::Cpu(cpu_replicas);
  const bool wants_cuda = absl::StrContains(spec, "cuda");
  int visible = 0;
  if (wants_cuda || (spec.empty() && HaveGpuBackend())) {
    absl::StatusOr<int> count = VisibleGpus();
    if (!count.ok()) {
      if (!wants_cuda) return cpu;  // no flag: CPU replicas, quietly
      return absl::Status(
          count.status().code(),
          absl::StrCat("--devices ", spec, ": ", count.status().message()));
    }
    visible = *count;
  }
  absl::StatusOr<DeviceList> list = ParseDeviceList(spec, visible, cpu);
  if (!list.ok()) {
    return absl::Status(
        list.status().code(),
        absl::StrCat("--devices \"", spec, "\": ", list.status().message()));
  }
  return list;
}

}  // namespace lockstep
