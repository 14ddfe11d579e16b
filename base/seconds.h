// Elapsed wall time on the steady clock, in seconds, for the loops that
// time their steps, reports and waits.
#ifndef LOCKSTEP_BASE_SECONDS_H_
#define LOCKSTEP_BASE_SECONDS_H_

#include <chrono>

namespace lockstep {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace lockstep

#endif  // LOCKSTEP_BASE_SECONDS_H_
