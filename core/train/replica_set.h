// The local replicas of one process: R copies of the model on persistent
// lanes (threads). A step computes every replica's gradients on its slice,
// sums them into replica 0 in replica order (deterministic), and after the
// caller's update mirrors replica 0's parameters to the others. The
// cluster worker inserts its cross-worker all-reduce between the two.
#ifndef LOCKSTEP_CORE_TRAIN_REPLICA_SET_H_
#define LOCKSTEP_CORE_TRAIN_REPLICA_SET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective/replica_sum.h"
#include "core/data/batch_prefetcher.h"
#include "core/data/dataset.h"
#include "core/job/job_spec.h"
#include "core/model/model.h"
#include "core/step_pool.h"
#include "core/train/replica.h"

namespace lockstep {

class ReplicaSet {
 public:
  // Builds `replica_indices.size()` identical replicas (same seed, same
  // initial bytes); `replica_indices` are their global replica indices,
  // which seed their dropout masks. Up to `threads` lanes run replicas side
  // by side; with one lane the kernels get every thread instead. (GPU
  // replicas are core/train/gpu_replicas.h's.)
  // A model with layers that sum across replicas in their passes (sync
  // batch norm) gets a lane per replica whatever `threads` says: each
  // replica waits for the others inside its pass.
  static absl::StatusOr<std::unique_ptr<ReplicaSet>> Create(
      const JobSpec& spec, std::vector<int64_t> replica_indices, int threads);

  int64_t size() const { return static_cast<int64_t>(replicas_.size()); }
  // Replica 0's host model: its params are the set's parameters and, after
  // ComputeGradients, the summed gradients.
  Model& primary() { return replicas_[0]->host(); }
  const std::vector<Param*>& params() { return replicas_[0]->host().params(); }
  const std::vector<int64_t>& replica_indices() const { return indices_; }

  // Forward/backward on every replica's slice of `batch` (one ReplicaBatch
  // per replica, in order), and the fixed-order sum (replica order) into
  // params()' grads. The grads are then d(mean loss over the global
  // batch)/dparam for the samples held here. Blocks until done.
  // A micro-batch of a step (batch.micros > 1, gradient accumulation, one
  // call per micro-batch in order): before the last, each replica adds its
  // gradients to what it kept of the step and nothing is summed or
  // reported; the last adds each replica's kept sum to its gradients
  // before the sum over replicas, so a replica's step gradient is the same
  // here as on a worker that holds it alone.
  // `on_param_summed(i)`, if set, runs as soon as param i's sum is final
  // (last layer first, on a lane thread, possibly concurrently for
  // different i): the cluster worker starts a bucket's all-reduce from it
  // while backward continues.
  // Errors: a replica's (a CUDA error, say), naming its device.
  absl::StatusOr<BatchLoss> ComputeGradients(
      Batch& batch, const Loss& loss, uint64_t seed,
      const std::function<void(int param_index)>& on_param_summed = nullptr);
  // Copies params() values to every other replica and hands the new values
  // to every device replica (after an update or a restore).
  absl::Status MirrorParams();
  // The workers' part of the sums inside the passes (sync batch norm):
  // called by one lane of this process per sum with the step's global step
  // and the collective's key; unset, the sums cover this process alone.
  using WorkerSum = std::function<absl::Status(
      int64_t step, int32_t key, float* data, int64_t count)>;
  void SetWorkerSum(WorkerSum sum) { worker_sum_ = std::move(sum); }
  // cluster.shard "gradients": once param i's sum is made, the other
  // replicas' gradients of it are handed back to the kernel (ReleasePages)
  // until their backward writes them again.
  void set_release_summed(bool release) { release_summed_ = release; }
  // Loss and accuracy over a whole dataset, chunks spread over the lanes
  // and summed in chunk order.
  absl::StatusOr<BatchLoss> Evaluate(const Dataset& data, const Loss& loss);

 private:
  ReplicaSet() = default;
  // Called by each replica's backward when param i's grad is final; the
  // last replica to get there sums param i across replicas.
  void OnGradReady(int param_index);
  // Replica r's gradients into kept_[r] (copied when `first`, else added).
  void Keep(int64_t r, bool first);

  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<int64_t> indices_;
  std::unique_ptr<StepPool> pool_;
  // Per step: how many replicas have produced each param's grad.
  std::unique_ptr<std::atomic<int>[]> ready_counts_;
  const std::function<void(int)>* on_param_summed_ = nullptr;
  // Set when the model sums across replicas in its passes.
  std::unique_ptr<ReplicaSum> pass_sum_;
  WorkerSum worker_sum_;
  bool release_summed_ = false;
  // Gradient accumulation: per replica, per param, the step's earlier
  // micro-batches' gradients; set per ComputeGradients call.
  std::vector<std::vector<Tensor>> kept_;
  bool keeping_ = false;
  bool adding_kept_ = false;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_REPLICA_SET_H_
