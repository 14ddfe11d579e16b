// Dynamic loss scaling (see loss_scale.h).
#include "core/train/loss_scale.h"

#include <algorithm>

namespace lockstep {

LossScale::LossScale(bool enabled) : enabled_(enabled) {
  state_.scale = kInitialScale;
}

bool LossScale::Update(bool finite) {
  if (!enabled_) return true;
  if (!finite) {
    state_.scale = std::max(state_.scale * kBackoffFactor, kMinScale);
    state_.good_steps = 0;
    ++state_.skipped_steps;
    return false;
  }
  if (++state_.good_steps >= kGrowthInterval) {
    state_.scale *= kGrowthFactor;
    state_.good_steps = 0;
  }
  return true;
}

LossScaleState LossScale::state() const {
  return enabled_ ? state_ : LossScaleState{};
}

void LossScale::Restore(const LossScaleState& state) {
  if (state.scale > 0) {
    state_ = state;
  } else {
    state_ = LossScaleState{};
    state_.scale = kInitialScale;
  }
}

}  // namespace lockstep
