// `lockstep worker --step-times FILE`: the wall-clock time at the end of
// every step a worker runs, one JSON line per job run appended to FILE when
// the run ends on that worker:
//   {"job": "mnist", "generation": 1, "rank": 0,
//    "steps": [1, 2, ...], "times": [1717171717.123456, ...],
//    "ends": [1717171717.123500, ...]}
// `steps[i]` is the global steps done after that step, `times[i]` unix
// seconds (a double) taken right after its optimizer update, before any
// epoch-end evaluation or checkpoint of that step; `ends[i]` once those are
// done too (the session's EndStep hook), so `ends[i] - times[i]` is the
// time spent between step i and the next on evaluation, checkpoints and
// reports (a run that stops early may lack the last end). The benchmarks time
// lockstep with it exactly as their PyTorch peers time themselves: wall time
// from the end of the last warm-up step to the end of the last timed step,
// on every rank, the maximum over ranks (benchmarks/bench_lib.sh,
// step_times_rate).
#ifndef LOCKSTEP_WORKER_STEP_TIMES_H_
#define LOCKSTEP_WORKER_STEP_TIMES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace lockstep {

// The seconds since the Unix epoch now (the system clock, microseconds).
double UnixSeconds();

// One run's step ends, recorded on the session's thread.
class StepTimes {
 public:
  void Add(int64_t step, double unix_seconds) {
    steps_.push_back(step);
    times_.push_back(unix_seconds);
  }
  // The end of the last added step's evaluation and checkpoint (if any).
  void End(double unix_seconds) {
    if (ends_.size() < times_.size()) ends_.push_back(unix_seconds);
  }
  size_t size() const { return steps_.size(); }
  // The JSON line above, without the newline.
  std::string JsonLine(const std::string& job, int64_t generation,
                       int64_t rank) const;

 private:
  std::vector<int64_t> steps_;
  std::vector<double> times_;
  std::vector<double> ends_;
};

// Checks at start-up that `path` can be opened for appending (creating it);
// the error names the flag: `--step-times "/no/dir/f": cannot open for
// appending: No such file or directory`.
absl::Status CheckStepTimesFile(const std::string& path);
// Appends `line` and a newline with one write(2) on an O_APPEND descriptor,
// so workers sharing a file do not interleave within a line.
absl::Status AppendStepTimes(const std::string& path, const std::string& line);

}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_STEP_TIMES_H_
