// Learning-rate schedules (see lr_schedule.h for the formulas).
#include "core/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace lockstep {

absl::StatusOr<LrSchedule> LrSchedule::Create(const ScheduleSpec& spec,
                                              double base_lr,
                                              int64_t steps_per_epoch) {
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("lr_schedule.", what));
  };
  if (!(base_lr > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.learning_rate: must be > 0, got ", base_lr));
  }
  if (spec.warmup_steps < 0) {
    return bad(absl::StrCat("warmup_steps: must be an integer >= 0, got ",
                            spec.warmup_steps));
  }
  switch (spec.type) {
    case ScheduleType::kConstant:
      break;
    case ScheduleType::kPiecewise:
      if (spec.values.size() != spec.boundaries.size() + 1) {
        return bad(absl::StrCat(
            "values: must have one more entry than boundaries (",
            spec.boundaries.size() + 1, "), got ", spec.values.size()));
      }
      for (size_t i = 1; i < spec.boundaries.size(); ++i) {
        if (!(spec.boundaries[i] > spec.boundaries[i - 1])) {
          return bad(absl::StrCat("boundaries[", i,
                                  "]: must be greater than the boundary "
                                  "before it (",
                                  spec.boundaries[i - 1], "), got ",
                                  spec.boundaries[i]));
        }
      }
      if (spec.unit == ScheduleUnit::kEpoch && steps_per_epoch < 1) {
        return bad(absl::StrCat(
            "unit: a schedule by epoch needs at least one step per epoch, "
            "got ",
            steps_per_epoch));
      }
      break;
    case ScheduleType::kPolynomial:
      if (spec.decay_steps < 1) {
        return bad(absl::StrCat("decay_steps: must be an integer >= 1, got ",
                                spec.decay_steps));
      }
      if (!(spec.power > 0)) {
        return bad(absl::StrCat("power: must be > 0, got ", spec.power));
      }
      break;
  }
  return LrSchedule(spec, base_lr, steps_per_epoch);
}

double LrSchedule::At(int64_t global_step) const {
  const int64_t step = std::max<int64_t>(global_step, 0);
  double lr = base_lr_;
  switch (spec_.type) {
    case ScheduleType::kConstant:
      break;
    case ScheduleType::kPiecewise: {
      const std::vector<double>& b = spec_.boundaries;
      size_t i = 0;
      if (spec_.unit == ScheduleUnit::kEpoch) {
        const double epoch = static_cast<double>(step / steps_per_epoch_);
        while (i < b.size() && epoch >= b[i]) ++i;
      } else {
        const double s = static_cast<double>(step);
        while (i < b.size() && s > b[i]) ++i;
      }
      lr = spec_.values[i];
      break;
    }
    case ScheduleType::kPolynomial: {
      const double s =
          static_cast<double>(std::min<int64_t>(step, spec_.decay_steps));
      const double frac = 1.0 - s / static_cast<double>(spec_.decay_steps);
      lr = (base_lr_ - spec_.end_learning_rate) * std::pow(frac, spec_.power) +
           spec_.end_learning_rate;
      break;
    }
  }
  if (spec_.warmup_steps > 0) {
    lr *= std::min(1.0, static_cast<double>(step + 1) /
                            static_cast<double>(spec_.warmup_steps));
  }
  return lr * scale_;
}

absl::StatusOr<LrSchedule> LrSchedule::ForJob(const JobSpec& job,
                                              int64_t steps_per_epoch) {
  ASSIGN_OR_RETURN(
      LrSchedule s,
      Create(job.lr_schedule, job.optimizer.learning_rate, steps_per_epoch));
  if (job.optimizer.scale_with_replicas) {
    s.scale_ = static_cast<double>(job.total_replicas());
  }
  return s;
}

}  // namespace lockstep
