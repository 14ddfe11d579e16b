// `--devices` for the verbs that run replicas (worker, train): cpu:N, or
// CUDA devices (cuda:0,cuda:1; "cuda" = every visible GPU), resolved
// against what this build and machine offer. Read here, once.
#ifndef LOCKSTEP_CLIENT_DEVICE_FLAGS_H_
#define LOCKSTEP_CLIENT_DEVICE_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "kernels/cuda/device_list.h"

namespace lockstep {

// `spec` is the flag's value ("" when not given); `cpu_replicas` is what
// applies without GPUs (--replicas). Without a flag: every visible GPU in a
// GPU build on a machine with GPUs, else cpu_replicas CPU replicas.
// InvalidArgument naming the bad entry (see ParseDeviceList); for CUDA
// entries, FailedPrecondition saying why GPUs cannot be used here (a build
// without --config=cuda, no usable device, an index the machine lacks).
absl::StatusOr<DeviceList> ResolveDevices(const std::string& spec,
                                          int cpu_replicas);

}  // namespace lockstep

#endif  // LOCKSTEP_CLIENT_DEVICE_FLAGS_H_
