// The CUDA implementation of core/train/device_data_parallel.h: one GpuModel and
// one NcclCommunicator per local GPU, the whole flat gradient buffer summed
// by one NCCL all-reduce, and the fused optimizer (kernels/cuda/optimizer.h)
// applied on every GPU (registered by :gpu_backend).
#ifndef LOCKSTEP_CORE_GPU_DEVICE_DATA_PARALLEL_H_
#define LOCKSTEP_CORE_GPU_DEVICE_DATA_PARALLEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/train/device_data_parallel.h"

namespace lockstep {
namespace cuda {

// What the registered backend's `make_data_parallel` calls. Builds the
// GpuModels (same spec and seed, so the same initial bytes on every GPU), then
// joins the NCCL communicator on every local GPU concurrently (NCCL's init is
// collective: sequential joins of two local ranks would deadlock) within
// config.timeout. Blocks. Errors: InvalidArgument for an inconsistent
// config, FailedPrecondition naming the device when a GPU is not usable,
// DeadlineExceeded when the other ranks do not join in time.
absl::StatusOr<std::unique_ptr<DeviceDataParallel>> MakeCudaDeviceDataParallel(
    const DeviceDataParallelConfig& config);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_GPU_DEVICE_DATA_PARALLEL_H_
