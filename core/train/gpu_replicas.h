// The GPU data path: one process's GPU replicas. A step runs
// forward/backward on each device, sums the gradients over the GPUs with
// NCCL and applies the optimizer on each device, so parameters leave the
// GPUs only for checkpoints and fingerprints. Two layouts:
//   - cluster.collective "nccl": one communicator over every GPU of the
//     generation (NCCL rank = global replica index);
//   - "ring" (host_all_reduce set): NCCL over this process's GPUs only; the
//     local sum goes through pinned host memory into host_all_reduce (the
//     gRPC ring across workers) and back to every GPU before the update.
// `lockstep train` uses the first with every replica local. The CUDA build
// provides the implementation (MakeGpuReplicas in
// core/train/gpu_backend.h). Not thread-safe except Abort().
#ifndef LOCKSTEP_CORE_TRAIN_GPU_REPLICAS_H_
#define LOCKSTEP_CORE_TRAIN_GPU_REPLICAS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/data/batch_prefetcher.h"
#include "core/data/dataset.h"
#include "core/job/job_spec.h"
#include "core/model/model.h"
#include "core/train/loss_scale.h"
#include "core/train/optimizer.h"

namespace lockstep {

class GpuReplicas {
 public:
  virtual ~GpuReplicas() = default;

  // One step of the local replicas (batch.replicas in local order) at
  // learning rate `lr`: their loss sums (this worker's), after every GPU of
  // the generation has the summed gradients applied (with config.micros >
  // 1, of every micro-batch of the step, added up per GPU). Blocks. `next`,
  // when not null, is the batch of the following step: its copy to the devices
  // (through pinned memory) runs while this step computes, and the next
  // Step with that batch uses it. With precision "fp16" the loss is scaled
  // by the loss scale, and a step whose summed gradients hold an inf or NaN
  // changes nothing but the scale (loss_scale().skipped_steps counts it;
  // every rank sees the same sums, so every rank skips it). Errors: a CUDA
  // or NCCL failure (NCCL's remote and system errors are Aborted or
  // Unavailable: a peer is gone), Cancelled after Abort().
  virtual absl::StatusOr<BatchLoss> Step(Batch& batch, const Batch* next,
                                         const Loss& loss, uint64_t seed,
                                         double lr) = 0;
  // Loss and accuracy of `data` on the first local device (no collective).
  virtual absl::StatusOr<BatchLoss> Evaluate(const Dataset& data,
                                             const Loss& loss) = 0;
  // The first device's parameters into `params` (host, model order) and
  // its optimizer state into `optimizer`'s StateTensors and iterations: for
  // checkpoints and fingerprints, and after a failed step or Abort() for
  // the state a rank keeps in memory when StateIntact().
  virtual absl::Status PullState(const std::vector<Param*>& params,
                                 Optimizer& optimizer) = 0;
  // The host parameters and optimizer state onto every local device (after
  // a restore).
  virtual absl::Status PushState(const std::vector<Param*>& params,
                                 Optimizer& optimizer) = 0;
  // Precision "fp16": the dynamic loss scale the steps use and update, for
  // checkpoints, progress and the result; scale 0 for other precisions.
  virtual LossScaleState loss_scale() const = 0;
  // A checkpoint's (scale 0: start afresh); nothing without loss scaling.
  virtual void RestoreLossScale(const LossScaleState& state) = 0;
  // After a failed Step: true when no device began that step's update, so
  // every device still holds the state from before it (with keep_state
  // the update waits for the sum over GPUs, so a failed sum leaves it so);
  // false when some device may have applied it. True after a good Step.
  virtual bool StateIntact() const = 0;
  // From any thread: pending and later calls fail with Cancelled (not
  // PullState while StateIntact()).
  virtual void Abort() = 0;
};

struct GpuReplicasConfig {
  JobSpec spec;
  std::vector<int> devices;              // local CUDA ordinals, one each
  std::vector<int64_t> replica_indices;  // their global replica indices
  int64_t world_replicas = 0;            // every GPU of the generation
  // Gradient accumulation: each step's batch runs as this many
  // micro-batches of spec.batch_size_per_replica samples (MicroBatch),
  // each GPU adding up its gradients before the sum over GPUs, as
  // ReplicaSet does. Not with sync batch norm (its sums inside the pass).
  int32_t micros = 1;
  // A worker that keeps its state in memory for a rejoin
  // (TrainingSession::CopyState): in the NCCL layout each GPU waits for
  // the sum before enqueuing the update (one more host wait a step), so a
  // failed collective leaves the state as it was (StateIntact).
  bool keep_state = false;
  // 128 bytes, from NCCL rank 0 (NewNcclId; with host_all_reduce, this
  // process makes it).
  std::string nccl_id;
  absl::Duration timeout = absl::Seconds(120);  // communicator set-up
  // The ring layout (see above): called once per step, on the Step thread,
  // with the local GPUs' gradient sum in pinned host memory (GpuModel's flat
  // layout: each param at its offset, zero padding; `floats` of them). It
  // must leave the sum over every worker there; an error fails the step.
  std::function<absl::Status(int64_t global_step, float* grads, int64_t floats)>
      host_all_reduce;
  // Sync batch norm's sums inside the pass: the local GPUs meet at a host
  // barrier (ReplicaSum, lane order), then this is called once per sum,
  // on one lane's thread, to add the other workers' values in place (the
  // job's gRPC transport); unset, the local GPUs are all.
  std::function<absl::Status(int64_t global_step, int32_t key, float* data,
                             int64_t count)>
      pass_sum;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_GPU_REPLICAS_H_
