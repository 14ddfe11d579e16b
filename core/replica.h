// One model replica of a ReplicaSet: the CPU Model itself, or a GPU replica
// (built by the factory the CUDA build registers). Every replica keeps a
// host Model whose params hold its parameter values and, after TrainStep,
// its gradients, so the local sum, the ring all-reduce, the optimizer and
// checkpoints work on host memory whatever the device. Not thread-safe:
// one thread drives a replica at a time.
#ifndef LOCKSTEP_CORE_REPLICA_H_
#define LOCKSTEP_CORE_REPLICA_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/job_spec.h"
#include "core/model.h"

namespace lockstep {

class Replica {
 public:
  virtual ~Replica() = default;

  // The host model (see above). Valid for the replica's life.
  virtual Model& host() = 0;
  // "cpu" or "cuda:N".
  virtual std::string device() const = 0;

  // Model::TrainStep's contract; the gradients land in host() params.
  virtual absl::StatusOr<BatchLoss> TrainStep(const Tensor& x,
                                              const int32_t* labels,
                                              LossType loss, float grad_scale,
                                              uint64_t dropout_seed) = 0;
  virtual absl::StatusOr<BatchLoss> Evaluate(const Tensor& x,
                                             const int32_t* labels,
                                             LossType loss) = 0;
  // host() params' values changed (an update, a restore, a mirror): a
  // device replica takes them before its next step.
  virtual absl::Status ParamsChanged() = 0;
  // Called with a param index once its host gradient is final, during
  // TrainStep, on the TrainStep thread (last layer first).
  virtual void SetGradReadyCallback(std::function<void(int)> cb) = 0;
};

// A CPU replica: the Model runs the step itself.
absl::StatusOr<std::unique_ptr<Replica>> MakeCpuReplica(const JobSpec& spec);

// GPU replicas come from the CUDA build (kernels/cuda/layers registers its
// backend at start-up); `device` is the CUDA ordinal.
using GpuReplicaFactory =
    std::function<absl::StatusOr<std::unique_ptr<Replica>>(const JobSpec& spec,
                                                           int device)>;
struct GpuBackend {
  GpuReplicaFactory make_replica;
  // How many GPUs this process can use; FailedPrecondition saying why
  // there is none (no driver, ...).
  std::function<absl::StatusOr<int>()> visible_devices;
};
void RegisterGpuBackend(GpuBackend backend);
bool HaveGpuReplicas();
// The backend's count; FailedPrecondition without the CUDA build.
absl::StatusOr<int> VisibleGpus();
// FailedPrecondition when this build has no GPU replicas ("built without
// --config=cuda"), or the factory's error (no usable device, ...).
absl::StatusOr<std::unique_ptr<Replica>> MakeGpuReplica(const JobSpec& spec,
                                                        int device);

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_REPLICA_H_
