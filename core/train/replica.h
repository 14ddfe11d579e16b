// One CPU model replica of a ReplicaSet: a host Model whose params hold its
// parameter values and, after TrainStep, its gradients, so the local sum,
// the ring all-reduce, the optimizer and checkpoints work on host memory.
// (GPU replicas keep their state on the devices: core/train/gpu_replicas.h.)
// Not thread-safe: one thread drives a replica at a time.
#ifndef LOCKSTEP_CORE_TRAIN_REPLICA_H_
#define LOCKSTEP_CORE_TRAIN_REPLICA_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/job/job_spec.h"
#include "core/model/model.h"

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
                                              const Loss& loss,
                                              float grad_scale,
                                              uint64_t dropout_seed) = 0;
  virtual absl::StatusOr<BatchLoss> Evaluate(const Tensor& x,
                                             const int32_t* labels,
                                             const Loss& loss) = 0;
  // host() params' values changed (an update, a restore, a mirror): a
  // device replica takes them before its next step.
  virtual absl::Status ParamsChanged() = 0;
  // Called with a param index once its host gradient is final, during
  // TrainStep, on the TrainStep thread (last layer first).
  virtual void SetGradReadyCallback(std::function<void(int)> cb) = 0;
};

// A CPU replica: the Model runs the step itself.
absl::StatusOr<std::unique_ptr<Replica>> MakeCpuReplica(const JobSpec& spec);


}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_REPLICA_H_
