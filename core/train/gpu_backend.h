// The GPU side of the engine, registered by the CUDA build: the GPU data
// path (core/train/gpu_replicas.h), NCCL ids and the device count.
// core/gpu:gpu_backend registers it at start-up (alwayslink); a binary
// built without --config=cuda has none, and every function here then says
// so.
#ifndef LOCKSTEP_CORE_TRAIN_GPU_BACKEND_H_
#define LOCKSTEP_CORE_TRAIN_GPU_BACKEND_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/job/job_spec.h"
#include "core/train/gpu_replicas.h"

namespace lockstep {

struct GpuBackend {
  // How many GPUs this process can use; FailedPrecondition saying why there
  // is none (no driver, ...).
  std::function<absl::StatusOr<int>()> visible_devices;
  std::function<absl::StatusOr<std::unique_ptr<GpuReplicas>>(
      const GpuReplicasConfig&)>
      make_replicas;
  // A fresh ncclUniqueId (rank 0 of each generation).
  std::function<absl::StatusOr<std::string>()> new_nccl_id;
};

void RegisterGpuBackend(GpuBackend backend);
bool HaveGpuBackend();

// Without a backend each is FailedPrecondition: "this lockstep was built
// without GPU support (build it with --config=cuda)".
absl::StatusOr<int> VisibleGpus();
absl::StatusOr<std::unique_ptr<GpuReplicas>> MakeGpuReplicas(
    const GpuReplicasConfig& config);
absl::StatusOr<std::string> NewNcclId();

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_GPU_BACKEND_H_
