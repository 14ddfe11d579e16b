// TrainingSession's step (see training_session.h, DESIGN "A step"): the
// replicas' gradients with the workers' buckets, the step's sums over the
// workers, and the update, whole or sharded (cluster.shard).
#include <cmath>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "core/data/batch_prefetcher.h"
#include "core/train/training_session.h"

namespace lockstep {

absl::Status TrainingSession::SumOverWorkers(int32_t bucket, int64_t step,
                                             float* values, int count,
                                             const char* what) {
  const SessionPeers& peers = config_.peers;
  if (peers.transport == nullptr) return absl::OkStatus();
  // A few values: GatherSum, half the ring's latency.
  return AnnotateStatus(
      GatherSum(*peers.transport,
                CollectiveTag{peers.generation, step, bucket, 0}, values, count,
                peers.ring),
      what);
}

absl::Status TrainingSession::PassSum(int64_t step, int32_t key, float* data,
                                      int64_t count) {
  const SessionPeers& peers = config_.peers;
  return AnnotateStatus(
      GatherSum(*peers.transport,
                CollectiveTag{peers.generation, step, kPassSumBucket + key, 0},
                data, count, peers.ring),
      "sum of sync batch norm's statistics over the workers");
}

absl::Status TrainingSession::Step(Batch& batch, const Batch* next,
                                   BatchLoss* global) {
  const JobSpec& spec = config_.spec;
  const double lr = schedule_->At(batch.global_step);
  BatchLoss local;
  applied_ = false;
  pending_.reset();
  skipped_ = false;
  if (gpus_ != nullptr) {
    // Gradients summed over the GPUs and the update applied on each, by
    // NCCL and the devices; the host optimizer only counts the iteration.
    const LossScaleState before = gpus_->loss_scale();
    ASSIGN_OR_RETURN(local,
                     gpus_->Step(batch, next, *spec.loss, spec.seed, lr));
    gpu_steps_ = batch.global_step + 1;
    const LossScaleState after = gpus_->loss_scale();
    if (after.skipped_steps != before.skipped_steps) {
      skipped_ = true;
      host_->Log(absl::StrFormat(
          "step %d: the fp16 gradients overflowed (inf or NaN); the update "
          "is skipped on every rank and the loss scale goes from %g to %g",
          batch.global_step, before.scale, after.scale));
    }
  } else {
    ASSIGN_OR_RETURN(local, ComputeGradients(batch));
  }
  *global = local;
  leaving_ = 0;
  regroup_ = false;
  if (config_.peers.transport != nullptr) {
    // The 4th value counts the ranks shutting down and the 5th those told
    // to regroup, so every rank learns it at the same step.
    float m[5] = {
        static_cast<float>(local.loss_sum), static_cast<float>(local.correct),
        static_cast<float>(local.count), host_->Leaving() ? 1.0f : 0.0f,
        host_->Regrouping() ? 1.0f : 0.0f};
    RETURN_IF_ERROR(SumOverWorkers(kLossBucket, batch.global_step, m, 5,
                                   "all-reduce of the step's loss"));
    global->loss_sum = m[0];
    global->correct = static_cast<int64_t>(std::llround(m[1]));
    global->count = static_cast<int64_t>(std::llround(m[2]));
    leaving_ = static_cast<int>(std::lround(m[3]));
    regroup_ = m[4] > 0.5f;
  }
  // GPU replicas keep the optimizer's count with its state; PullState
  // brings it to the host optimizer before anything reads it.
  if (gpus_ != nullptr) return absl::OkStatus();
  if (!optimizer_->sharded()) {
    optimizer_->Apply(lr);
    UpdateMovingAverages(replicas_->params(), batch.global_count);
    return replicas_->MirrorParams();
  }
  // Sharded: this rank updates the ranges it owns (the only ones whose
  // gradients were summed here; the moving averages elsewhere come out
  // wrong and are overwritten), and the all-gather brings it the others'.
  ASSIGN_OR_RETURN(
      const double norm, optimizer_->GlobalNorm([&](float* values, int count) {
        return SumOverWorkers(kNormBucket, batch.global_step, values, count,
                              "sum of the gradient norm's parts");
      }));
  if (copy_ != nullptr) {
    // Every rank past this barrier holds what the update needs, so once
    // one rank makes it, any rank can (CopyState: a failure here leaves
    // the update pending, made on the kept copy).
    pending_ = PendingUpdate{lr, norm, batch.global_count};
    float one = 1;
    RETURN_IF_ERROR(SumOverWorkers(kUpdateBarrierBucket, batch.global_step,
                                   &one, 1, "the barrier before the update"));
  }
  Update(lr, norm, batch.global_count);
  RETURN_IF_ERROR(
      buckets_->GatherParams(config_.peers.generation, batch.global_step));
  applied_ = false;  // the step is complete: step() counts it next
  return replicas_->MirrorParams();
}

void TrainingSession::Update(double lr, double norm, int64_t global_count) {
  optimizer_->ApplyWithNorm(lr, norm);
  // The copy of the previous rank's part, from the sums it passed here,
  // with the same norm: its owner's bits.
  if (copy_ != nullptr) copy_->ApplyWithNorm(lr, norm);
  UpdateMovingAverages(replicas_->params(), global_count);
  applied_ = true;
  pending_.reset();
}

absl::StatusOr<BatchLoss> TrainingSession::ComputeGradients(Batch& batch) {
  const JobSpec& spec = config_.spec;
  const int32_t micros = micros_;
  BatchLoss local;
  // Micro-batches 0..m-2 (gradient accumulation): each replica adds up its
  // own gradients (ReplicaSet), nothing leaves yet.
  for (int32_t k = 0; k + 1 < micros; ++k) {
    Batch micro = MicroBatch(batch, k, micros, spec.batch_size_per_replica);
    ASSIGN_OR_RETURN(BatchLoss part,
                     replicas_->ComputeGradients(micro, *spec.loss, spec.seed));
    local += part;
  }
  Batch last_micro;
  if (micros > 1) {
    last_micro =
        MicroBatch(batch, micros - 1, micros, spec.batch_size_per_replica);
  }
  Batch& last = micros > 1 ? last_micro : batch;
  BatchLoss part;
  if (buckets_ != nullptr) {
    // Each bucket's all-reduce starts as soon as backward produced it.
    buckets_->BeginStep(config_.peers.generation, batch.global_step);
    ASSIGN_OR_RETURN(part, replicas_->ComputeGradients(
                               last, *spec.loss, spec.seed,
                               [this](int i) { buckets_->ParamReady(i); }));
    RETURN_IF_ERROR(buckets_->FinishStep());
  } else {
    ASSIGN_OR_RETURN(part,
                     replicas_->ComputeGradients(last, *spec.loss, spec.seed));
  }
  local += part;
  return local;
}

}  // namespace lockstep
