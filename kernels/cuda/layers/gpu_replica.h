// GPU replicas for core/replica.h: a GpuModel on one device behind the
// Replica interface (registered by :gpu_backend).
//
// The step runs on the device; its gradients are copied into the host
// model's params (through pinned staging) so the local sum, the ring
// all-reduce, the host optimizer and checkpoints are the CPU path's. New
// parameter values go back to the device in ParamsChanged. This is the
// "ring through pinned host buffers" path; the NCCL path with device-side
// updates is device_data_parallel.h.
#ifndef LOCKSTEP_KERNELS_CUDA_LAYERS_GPU_REPLICA_H_
#define LOCKSTEP_KERNELS_CUDA_LAYERS_GPU_REPLICA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/job_spec.h"
#include "core/replica.h"

namespace lockstep {
namespace cuda {

// A GPU replica of `spec` on cuda:`device`: the same initial parameters as
// a CPU replica of the same spec. FailedPrecondition naming the device
// problem when it cannot be used.
absl::StatusOr<std::unique_ptr<Replica>> MakeGpuReplica(const JobSpec& spec,
                                                        int device);

}  // namespace cuda
}  // namespace lockstep

#endif  // LOCKSTEP_KERNELS_CUDA_LAYERS_GPU_REPLICA_H_
