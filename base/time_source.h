// The time a component's timers read (absl::Time): the real clock in the
// product, a hand-moved one in tests, so that a test advances time instead
// of sleeping against a timeout.
#ifndef LOCKSTEP_BASE_TIME_SOURCE_H_
#define LOCKSTEP_BASE_TIME_SOURCE_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockstep {

class TimeSource {
 public:
  virtual ~TimeSource() = default;
  // Thread-safe; never goes back.
  virtual absl::Time Now() const = 0;
};

// absl::Now(). Lives for the whole program.
const TimeSource* RealTime();

// Starts at the real time of its construction and moves only when told.
class ManualTime : public TimeSource {
 public:
  ManualTime();
  absl::Time Now() const override;
  // Moves the time forward by `d` (a negative `d` is ignored).
  void Advance(absl::Duration d);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep

#endif  // LOCKSTEP_BASE_TIME_SOURCE_H_
