// TrainingSession's step loop and its reports (see training_session.h).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/seconds.h"
#include "base/status_macros.h"
#include "core/data/batch_prefetcher.h"
#include "core/train/training_session.h"

namespace lockstep {

ProgressInfo TrainingSession::Progress() {
  const int64_t spe = plan_->steps_per_epoch();
  ProgressInfo info;
  info.job = config_.spec.name;
  info.epochs = (total_steps_ + spe - 1) / spe;
  // The epoch a step belongs to: an epoch's last step still counts as its.
  info.epoch = std::min(step_ / spe + (step_ % spe ? 1 : 0), info.epochs);
  info.step = step_;
  info.total_steps = total_steps_;
  info.loss = meter_.epoch().mean_loss();
  info.accuracy = meter_.epoch().accuracy();
  info.learning_rate = schedule_->At(std::max<int64_t>(step_ - 1, 0));
  info.samples_per_sec = meter_.TakeWindowRate();
  info.eta_seconds = meter_.Eta(end_step_ - step_, plan_->global_batch_size());
  info.optimizer_state_bytes = optimizer_state_bytes();
  if (gpus_ != nullptr) {
    const LossScaleState ls = gpus_->loss_scale();
    info.loss_scale = ls.scale;
    info.skipped_steps = ls.skipped_steps;
  }
  return info;
}

ScalarList TrainingSession::SummaryScalars(double step_seconds) {
  const BatchLoss interval = meter_.TakeSummary();
  ScalarList s = {{"train/loss", interval.mean_loss()},
                  {"train/accuracy", interval.accuracy()},
                  {"learning_rate", schedule_->At(step_ - 1)},
                  {"samples_per_sec", meter_.run_rate()}};
  if (gpus_ != nullptr && gpus_->loss_scale().scale > 0) {
    s.push_back({"loss_scale", gpus_->loss_scale().scale});
    s.push_back({"skipped_steps",
                 static_cast<double>(gpus_->loss_scale().skipped_steps)});
  }
  if (config_.peers.transport != nullptr) {
    const BucketStats b =
        buckets_ != nullptr ? buckets_->stats() : BucketStats();
    s.push_back({"allreduce_seconds", b.allreduce_seconds});
    // The part of it the step waited for after backward: the rest was
    // hidden behind backward.
    s.push_back({"allreduce_wait_seconds", b.wait_seconds});
    s.push_back({"step_seconds", step_seconds});
  }
  return s;
}

bool TrainingSession::CheckpointDue(bool epoch_end) const {
  const int64_t every = config_.spec.checkpoint.every_steps;
  return epoch_end || step_ == total_steps_ ||
         (every > 0 && step_ % every == 0);
}

absl::StatusOr<TrainingSession::Outcome> TrainingSession::Run() {
  const JobSpec& spec = config_.spec;
  const int64_t spe = plan_->steps_per_epoch();
  end_step_ = total_steps_;
  if (config_.end_step >= 0) {
    end_step_ = std::min(end_step_, std::max(config_.end_step, start_step_));
  }
  const int64_t fp_every = config_.fingerprint_every_steps;
  BatchPrefetcher prefetcher(&train_, plan_.get(), config_.replicas,
                             replicas_->primary().input_shape(), step_,
                             end_step_);
  while (step_ < end_step_) {
    if (host_->StopRequested()) return Outcome::kStopped;
    // Timed from the wait for data on: a slow input pipeline shows in the
    // samples/s figure instead of hiding behind the prefetch thread.
    const Clock::time_point t0 = Clock::now();
    ASSIGN_OR_RETURN(Batch batch, prefetcher.Next());
    if (spec.audit.samples) {
      SampleRecord record = RecordOf(*plan_, batch, config_.replicas);
      RETURN_IF_ERROR(host_->SamplesTaken(record));
    }
    BatchLoss loss;
    RETURN_IF_ERROR(AnnotateStatus(Step(batch, prefetcher.PeekReady(), &loss),
                                   absl::StrCat("step ", batch.global_step)));
    const double dt = SecondsSince(t0);
    ++step_;
    // A skipped fp16 step's loss may be inf (an overflow in the forward
    // pass): the loss scale's business, not divergence; its samples count
    // toward the rate only.
    RETURN_IF_ERROR(meter_.Add(
        step_, dt, batch.global_count,
        skipped_ && !std::isfinite(loss.loss_sum) ? BatchLoss() : loss));
    // From here to the next step: the ETA's overhead (evaluation,
    // checkpoints, summaries), which the samples/s leaves out.
    const Clock::time_point between = Clock::now();
    StepFigures figures;
    figures.step = step_;
    figures.seconds = dt;
    figures.local_samples = batch.global_count / config_.world;
    figures.loss = loss;
    if (buckets_ != nullptr) figures.buckets = buckets_->stats();
    host_->StepDone(figures);

    const bool epoch_end = step_ % spe == 0;
    const bool last = step_ == total_steps_;
    const bool fingerprint_due =
        config_.report_fingerprints &&
        (last || (fp_every > 0 && step_ % fp_every == 0));
    if (host_->ProgressDue(step_, epoch_end || step_ == end_step_) ||
        fingerprint_due) {
      const ProgressInfo info = Progress();
      std::string fingerprint;
      if (fingerprint_due) {
        ASSIGN_OR_RETURN(fingerprint, Fingerprint());
      }
      RETURN_IF_ERROR(
          host_->Progress(info, fingerprint_due ? &fingerprint : nullptr));
    }
    if (spec.summary.every_steps > 0 && step_ % spec.summary.every_steps == 0) {
      RETURN_IF_ERROR(host_->Scalars(step_, SummaryScalars(dt)));
    }
    if (epoch_end || last) {
      const Clock::time_point e0 = Clock::now();
      ASSIGN_OR_RETURN(last_eval_, Evaluate());
      evaluated_ = true;
      last_train_ = meter_.epoch();
      host_->Event(EpochDoneLine(spec.name, (step_ + spe - 1) / spe,
                                 meter_.epoch(), last_eval_, SecondsSince(e0)));
      RETURN_IF_ERROR(
          host_->Scalars(step_, EpochScalars(meter_.epoch(), last_eval_)));
    }
    if (CheckpointDue(epoch_end)) RETURN_IF_ERROR(SaveCheckpoint());
    RETURN_IF_ERROR(host_->EndStep(step_));
    if (epoch_end) meter_.EndEpoch();
    meter_.AddOverhead(SecondsSince(between));
    // At the last step the job ends anyway: nothing to leave or regroup.
    if (leaving_ > 0 && !last) return Outcome::kLeaving;
    if (regroup_ && !last) return Outcome::kRegroup;
  }
  prefetcher.Stop();
  if (step_ >= total_steps_ && !evaluated_) {
    // Restored at the last step: the result still needs its evaluation.
    ASSIGN_OR_RETURN(last_eval_, Evaluate());
    evaluated_ = true;
  }
  // Restored at the last step from a worker's memory: the final checkpoint
  // is committed now (nothing when it is on storage already).
  if (step_ >= total_steps_) RETURN_IF_ERROR(SaveCheckpoint());
  return Outcome::kFinished;
}

absl::StatusOr<SessionResult> TrainingSession::Result() {
  SessionResult r;
  r.steps = step_;
  r.total_steps = total_steps_;
  r.finished = step_ >= total_steps_;
  r.epochs = step_ / std::max<int64_t>(plan_->steps_per_epoch(), 1);
  r.resumed_from_step = start_step_;
  r.train = meter_.epoch().count > 0 ? meter_.epoch() : last_train_;
  r.test = last_eval_;
  r.samples_per_sec = meter_.run_rate();
  r.num_parameters = num_parameters();
  r.optimizer_state_bytes = optimizer_state_bytes();
  if (gpus_ != nullptr) r.loss_scale = gpus_->loss_scale();
  ASSIGN_OR_RETURN(r.fingerprint, Fingerprint());
  r.skipped_samples = SkippedSamples({&train_, &test_});
  return r;
}

}  // namespace lockstep
