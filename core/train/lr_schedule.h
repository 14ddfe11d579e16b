// The learning rate as a function of the global step: constant, piecewise
// constant (by epoch or by step) or Keras PolynomialDecay, with an optional
// linear warm-up.
#ifndef LOCKSTEP_CORE_TRAIN_LR_SCHEDULE_H_
#define LOCKSTEP_CORE_TRAIN_LR_SCHEDULE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/job/job_spec.h"

namespace lockstep {

// A value type: cheap to copy, immutable, thread-safe to read.
class LrSchedule {
 public:
  // `base_lr` is optimizer.learning_rate (the constant value and the start
  // of the polynomial decay; piecewise values replace it). `steps_per_epoch`
  // must be >= 1 for a piecewise schedule by epoch. Error: kInvalidArgument.
  static absl::StatusOr<LrSchedule> Create(const ScheduleSpec& spec,
                                           double base_lr,
                                           int64_t steps_per_epoch);

  // The rate for the update that follows `global_step` updates already
  // applied (0 for the first step; negative counts as 0):
  //  - piecewise by epoch: epoch = global_step / steps_per_epoch and the
  //    value is values[i] for the first i with epoch < boundaries[i]
  //    (values.back() past the last), like the Keras tutorial's decay();
  //  - piecewise by step: Keras PiecewiseConstantDecay, values[i] for the
  //    first i with global_step <= boundaries[i];
  //  - polynomial: (base - end) * (1 - min(step, decay_steps) /
  //    decay_steps)^power + end;
  //  then times min(1, (global_step + 1) / warmup_steps) when warming up,
  //  and times the replica count with optimizer.scale_with_replicas.
  double At(int64_t global_step) const;

  // The job's schedule: Create from its lr_schedule and learning rate,
  // scaled by job.total_replicas() when optimizer.scale_with_replicas (the
  // seed tutorials' scaled_learning_rate = base * num_replicas_in_sync).
  static absl::StatusOr<LrSchedule> ForJob(const JobSpec& job,
                                           int64_t steps_per_epoch);

 private:
  LrSchedule(const ScheduleSpec& spec, double base_lr, int64_t steps_per_epoch)
      : spec_(spec), base_lr_(base_lr), steps_per_epoch_(steps_per_epoch) {}

  ScheduleSpec spec_;
  double base_lr_;
  int64_t steps_per_epoch_;
  double scale_ = 1;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_LR_SCHEDULE_H_
