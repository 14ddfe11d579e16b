// Dynamic loss scaling for precision "fp16" (torch.cuda.amp.GradScaler's
// rule and defaults): the loss's gradient is multiplied by scale() so that
// small gradients survive the rounding of a product's inputs to IEEE half;
// the update divides it out again. A step whose summed gradients hold an
// inf or a NaN (the scale overflowed half's 65504 somewhere) is skipped and
// the scale halved; after kGrowthInterval applied steps in a row it
// doubles. The decision is taken on the gradients after the all-reduce,
// the same bits on every rank, so every rank skips the same steps and the
// replicas stay bitwise equal. The state goes into checkpoints
// (CheckpointState::loss_scale) so a resumed job scales as the run it
// continues would have.
#ifndef LOCKSTEP_CORE_TRAIN_LOSS_SCALE_H_
#define LOCKSTEP_CORE_TRAIN_LOSS_SCALE_H_

#include <cstdint>

#include "core/checkpoint/checkpoint.h"

namespace lockstep {

class LossScale {
 public:
  static constexpr double kInitialScale = 65536.0;  // 2^16, GradScaler's
  static constexpr double kGrowthFactor = 2.0;
  static constexpr double kBackoffFactor = 0.5;
  static constexpr int64_t kGrowthInterval = 2000;
  // The smallest scale a run of overflows leaves: below it the gradients
  // themselves are not finite, which no scale mends (the loss diverged).
  static constexpr double kMinScale = 1.0 / 16777216.0;  // 2^-24

  // enabled false: scale() is 1 and Update applies every step.
  explicit LossScale(bool enabled = false);

  bool enabled() const { return enabled_; }
  double scale() const { return enabled_ ? state_.scale : 1.0; }
  // 1 / scale() as the update multiplies by it (exact: a power of two).
  float unscale() const { return static_cast<float>(1.0 / scale()); }

  // After a step's update was enqueued: `finite` says whether every summed
  // gradient was. True when the step applied (finite, or scaling off);
  // false when it was skipped. Grows or backs off the scale.
  bool Update(bool finite);

  // For checkpoints: scale 0 when disabled.
  LossScaleState state() const;
  // From a checkpoint; a state with scale 0 (a checkpoint of a job
  // without loss scaling) starts from kInitialScale.
  void Restore(const LossScaleState& state);

 private:
  bool enabled_ = false;
  LossScaleState state_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_CORE_TRAIN_LOSS_SCALE_H_
