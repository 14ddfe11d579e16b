// The real and the hand-moved time sources.
#include "base/time_source.h"

#include "absl/time/clock.h"

namespace lockstep {
namespace {

class RealTimeSource : public TimeSource {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

const TimeSource* RealTime() {
  static const RealTimeSource* real = new RealTimeSource();
  return real;
}

ManualTime::ManualTime() : now_(absl::Now()) {}

absl::Time ManualTime::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void ManualTime::Advance(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return;
  absl::MutexLock lock(&mu_);
  now_ += d;
}

}  // namespace lockstep
