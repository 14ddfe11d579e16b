// TrainingSession's training state (see training_session.h): a restore, the
// checkpoint state, a checkpoint, and the copy a worker keeps in memory
// when its generation fails.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "core/data/data_loader.h"
#include "core/train/checkpoint_restore.h"
#include "core/train/training_session.h"

namespace lockstep {

absl::Status TrainingSession::Restore(const LoadedCheckpoint& loaded) {
  if (loaded.state.job_json != config_.job_json) {
    host_->Log(absl::StrCat("note: the job file changed since checkpoint ",
                            loaded.path, "; resuming with the new settings"));
  }
  std::vector<std::string> fresh;
  RETURN_IF_ERROR(
      ApplyCheckpoint(loaded, replicas_->params(), *optimizer_, &fresh));
  if (!fresh.empty()) host_->Log(FreshStateNote(fresh));
  if (copy_ != nullptr) {
    // The previous rank's part, kept here too (cluster.copies).
    RETURN_IF_ERROR(ApplyCheckpoint(loaded, replicas_->params(), *copy_));
  }
  RETURN_IF_ERROR(gpus_ != nullptr
                      ? gpus_->PushState(replicas_->params(), *optimizer_)
                      : replicas_->MirrorParams());
  if (gpus_ != nullptr) gpus_->RestoreLossScale(loaded.state.loss_scale);
  start_step_ = step_ = gpu_steps_ = loaded.state.step;
  // A state from a worker's memory is on storage only once saved again.
  saved_step_ = loaded.in_memory ? -1 : step_;
  restored_from_ = loaded.path;
  return absl::OkStatus();
}

CheckpointState TrainingSession::State(int64_t step) const {
  const int64_t spe = plan_->steps_per_epoch();
  CheckpointState state;
  state.step = step;
  state.epoch = step / spe;
  state.step_in_epoch = step % spe;
  state.seed = config_.spec.seed;
  state.generation = config_.peers.generation;
  state.optimizer_iterations = optimizer_->iterations();
  if (gpus_ != nullptr) state.loss_scale = gpus_->loss_scale();
  state.job_json = config_.job_json;
  state.artifacts = JobDataArtifacts(config_.spec.data, train_);
  state.train_loss = meter_.epoch().mean_loss();
  return state;
}

absl::StatusOr<std::vector<LoadedCheckpoint>> TrainingSession::CopyState() {
  if (gpus_ != nullptr) {
    // The devices hold it: the state before the step that failed, or,
    // when its update was made and the loss's sum after it failed, the
    // step after (the coordinator takes the furthest a survivor kept).
    if (!gpus_->StateIntact()) {
      return absl::FailedPreconditionError(
          "GPU replicas keep no training state in memory after this "
          "failure: the step's update had begun on a device when it broke, "
          "so the devices may disagree");
    }
    RETURN_IF_ERROR(
        AnnotateStatus(gpus_->PullState(replicas_->params(), *optimizer_),
                       "keeping the GPUs' training state in memory"));
    return std::vector<LoadedCheckpoint>{WholeState(gpu_steps_)};
  }
  if (optimizer_->sharded() && copy_ == nullptr) {
    return absl::FailedPreconditionError(
        "the optimizer state is sharded (cluster.shard) without copies "
        "(cluster.copies false): this rank holds only its part of it");
  }
  if (!optimizer_->sharded()) {
    return std::vector<LoadedCheckpoint>{WholeState(step_)};
  }
  // Sharded with copies: this rank's part and the previous rank's, of the
  // parameters and of the optimizer state. Once the update of the step
  // that broke was made here (applied_; the parameters' all-gather then
  // failed) they are of the step after it: only these ranges are.
  std::vector<LoadedCheckpoint> out;
  out.push_back(KeptParts(applied_ ? step_ + 1 : step_));
  if (pending_.has_value()) {
    // The update was due (every rank had what it needs) when the barrier
    // before it failed: other ranks may have made it. Both then: the
    // coordinator picks the step every survivor holds.
    Update(pending_->lr, pending_->norm, pending_->global_count);
    out.push_back(KeptParts(step_ + 1));
  }
  return out;
}

LoadedCheckpoint TrainingSession::WholeState(int64_t step) {
  LoadedCheckpoint c;
  c.state = State(step);
  for (Param* p : replicas_->params()) {
    c.model.emplace_back(p->name, p->value);
  }
  for (auto& [name, t] : optimizer_->StateTensors()) {
    c.optimizer.emplace_back(name, *t);
  }
  return c;
}

LoadedCheckpoint TrainingSession::KeptParts(int64_t step) {
  LoadedCheckpoint c;
  c.state = State(step);
  const std::vector<Param*>& params = replicas_->params();
  const int world = config_.peers.transport->world_size();
  const int rank = config_.peers.transport->rank();
  for (int owner : {rank, (rank + world - 1) % world}) {
    for (const ParamRange& r : buckets_->OwnedRanges(owner)) {
      const Param& p = *params[r.param];
      TensorPart part{p.name, p.value.shape(), r.begin, Tensor({r.size}),
                      owner};
      std::copy(p.value.data() + r.begin, p.value.data() + r.begin + r.size,
                part.data.data());
      c.model_parts.push_back(std::move(part));
    }
    Optimizer& o = owner == rank ? *optimizer_ : *copy_;
    for (const StatePiece& s : o.StatePieces()) {
      c.optimizer_parts.push_back(
          TensorPart{s.name, s.shape, s.offset, *s.data, owner});
    }
    if (world == 1) break;
  }
  // What no bucket holds (frozen layers) is the same everywhere.
  for (Param* p : params) {
    if (p->update == ParamUpdate::kFrozen) {
      c.model.emplace_back(p->name, p->value);
    }
  }
  return c;
}

absl::Status TrainingSession::SaveCheckpoint() {
  if (step_ == saved_step_) return absl::OkStatus();
  RETURN_IF_ERROR(SyncHostState());
  const CheckpointState state = State(step_);
  NamedTensors model;
  for (Param* p : replicas_->params()) model.emplace_back(p->name, &p->value);
  OptimizerParts opt;
  opt.sharded = optimizer_->sharded();
  opt.tensors = optimizer_->num_state_tensors();
  opt.pieces = optimizer_->StatePieces();
  RETURN_IF_ERROR(
      host_->SaveCheckpoint(state, model, opt, step_ == total_steps_));
  saved_step_ = step_;
  return absl::OkStatus();
}

}  // namespace lockstep
