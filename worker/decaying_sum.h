// A sum that forgets: each amount added decays with a half-life, so the
// ratio of two such sums fed together is a recent average (the last few
// half-lives weigh most). What a worker reports of its ring link and its
// own work in each heartbeat (HeartbeatRequest.timing). Not thread-safe.
#ifndef LOCKSTEP_WORKER_DECAYING_SUM_H_
#define LOCKSTEP_WORKER_DECAYING_SUM_H_

#include <algorithm>
#include <cmath>

#include "absl/time/time.h"

namespace lockstep {

class DecayingSum {
 public:
  explicit DecayingSum(absl::Duration half_life = absl::Seconds(10))
      : half_life_s_(absl::ToDoubleSeconds(half_life)) {}

  void Add(double amount, absl::Time now) {
    value_ = Value(now) + amount;
    at_ = now;
  }
  double Value(absl::Time now) const {
    if (value_ == 0) return 0;
    const double age = std::max(0.0, absl::ToDoubleSeconds(now - at_));
    return value_ * std::exp2(-age / half_life_s_);
  }

 private:
  double half_life_s_;
  double value_ = 0;
  absl::Time at_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_DECAYING_SUM_H_
