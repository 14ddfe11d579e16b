// The local replicas of one process: R copies of the model on persistent
// lanes (threads). A step computes every replica's gradients on its slice,
// sums them into replica 0 in replica order (deterministic), and after the
// caller's update mirrors replica 0's parameters to the others. The
// cluster worker inserts its cross-worker all-reduce between the two.
#ifndef LOCKSTEP_CORE_REPLICA_SET_H_
#define LOCKSTEP_CORE_REPLICA_SET_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/batch_prefetcher.h"
#include "core/dataset.h"
#include "core/job_spec.h"
#include "core/model.h"
#include "core/step_pool.h"

namespace lockstep {

class ReplicaSet {
 public:
  // Builds `replica_indices.size()` identical replicas (same seed, same
  // initial bytes); `replica_indices` are their global replica indices,
  // which seed their dropout masks. Up to `threads` lanes run replicas side
  // by side; with one lane the kernels get every thread instead.
  static absl::StatusOr<std::unique_ptr<ReplicaSet>> Create(
      const JobSpec& spec, std::vector<int64_t> replica_indices, int threads);

  int64_t size() const { return static_cast<int64_t>(replicas_.size()); }
  Model& primary() { return *replicas_[0]; }
  const std::vector<Param*>& params() { return replicas_[0]->params(); }
  const std::vector<int64_t>& replica_indices() const { return indices_; }

  // Forward/backward on every replica's slice of `batch` (one ReplicaBatch
  // per replica, in order), then the fixed-order sum into params()' grads.
  // The grads are then d(mean loss over the global batch)/dparam for the
  // samples held here. Blocks until done.
  BatchLoss ComputeGradients(Batch& batch, LossType loss, uint64_t seed);
  // Copies params() values to every other replica (after an update or a
  // restore).
  void MirrorParams();
  // Loss and accuracy over a whole dataset, chunks spread over the lanes
  // and summed in chunk order.
  BatchLoss Evaluate(const Dataset& data, LossType loss);

 private:
  ReplicaSet() = default;

  std::vector<std::unique_ptr<Model>> replicas_;
  std::vector<int64_t> indices_;
  std::unique_ptr<StepPool> pool_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_REPLICA_SET_H_
