// The CUDA implementation of core/train/gpu_replicas.h: one GpuModel and
// one NcclCommunicator per local GPU, the whole flat gradient buffer summed
// by one NCCL all-reduce, and the GPU optimizer (core/train/optimizer_cuda.h)
// applied on every GPU (registered by :gpu_backend).
#ifndef LOCKSTEP_CORE_GPU_GPU_REPLICAS_CUDA_H_
#define LOCKSTEP_CORE_GPU_GPU_REPLICAS_CUDA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/train/gpu_replicas.h"

namespace lockstep {
namespace cuda {

// What the registered backend's `make_data_parallel` calls. Builds the
// GpuModels (same spec and seed, so the same initial bytes on every GPU), then
// joins the NCCL communicator on every local GPU concurrently (NCCL's init is
// collective: sequential joins of two local ranks would deadlock) within
// config.timeout. Blocks. Errors: InvalidArgument for an inconsistent
// config, FailedPrecondition naming the device when a GPU is not usable,
// DeadlineExceeded when the other ranks do not join in time.
absl::StatusOr<std::unique_ptr<GpuReplicas>> MakeCudaGpuReplicas(
    const GpuReplicasConfig& config);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_CORE_GPU_GPU_REPLICAS_CUDA_H_
