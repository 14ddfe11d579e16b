// A worker's device list (`--devices cuda:0,cuda:1`, `cpu:N`, or empty) parsed
// into the replicas it runs: one per listed GPU, or N CPU replicas. Pure
// logic, no CUDA: the caller says how many GPUs are visible.
#ifndef LOCKSTEP_KERNELS_CUDA_DEVICE_LIST_H_
#define LOCKSTEP_KERNELS_CUDA_DEVICE_LIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep {

enum class DeviceKind { kCpu, kCuda };

struct DeviceList {
  DeviceKind kind = DeviceKind::kCpu;
  std::vector<int> cuda_ordinals;  // kCuda: one replica per ordinal, in order
  int cpu_replicas = 0;            // kCpu: number of CPU replicas (>= 1)

  static DeviceList Cpu(int replicas);
  static DeviceList Cuda(std::vector<int> ordinals);

  int replicas() const {
    return kind == DeviceKind::kCpu ? cpu_replicas
                                    : static_cast<int>(cuda_ordinals.size());
  }
  // The canonical spelling: "cpu:2" or "cuda:0,cuda:1".
  std::string ToString() const;
  bool operator==(const DeviceList& other) const;
};

// Parses `spec`:
//   "cuda:0,cuda:1"  those GPUs, one replica each (spaces around entries ok);
//   "cuda"           every visible GPU;
//   "cpu:N"          N >= 1 CPU replicas (alone: it cannot be mixed with cuda);
//   ""               every visible GPU, or `fallback` when none is visible.
// `visible_cuda_devices` is how many GPUs the process sees (0 when none or no
// driver). Errors are kInvalidArgument naming the bad entry (unknown kind,
// missing, negative or non-numeric index, duplicate, cpu mixed with cuda), or
// kFailedPrecondition for an index the machine does not have.
absl::StatusOr<DeviceList> ParseDeviceList(absl::string_view spec,
                                           int visible_cuda_devices,
                                           const DeviceList& fallback);

}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_DEVICE_LIST_H_
