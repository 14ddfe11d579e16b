// What the two all-reduce benchmark ranks (allreduce_lockstep.cc,
// allreduce_gloo.cc) share, so both sides run exactly the same protocol:
// the CLI, the sizes and iteration counts, the timing rule (a one-float-per-
// rank all-reduce after each iteration is the barrier and gathers the
// slowest rank's time), the check of the first sum, the RESULT lines and a
// process deadline.
#ifndef LOCKSTEP_BENCHMARKS_ALLREDUCE_HARNESS_H_
#define LOCKSTEP_BENCHMARKS_ALLREDUCE_HARNESS_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli_flags.h"

namespace lockstep {

struct BenchFlags {
  int rank = 0;
  int world = 0;
  std::string rendezvous;
  std::string host = "127.0.0.1";  // listen here, peers dial it
  std::vector<int64_t> sizes;  // bytes, whole float32s
  int64_t iters = 0;           // 0: chosen per size
  int64_t warmup = 3;
  int64_t timeout_s = 120;
  int64_t deadline_s = 1200;
  ParsedFlags raw;  // the system's own flags are read from here
};

// In place: data[0..count) becomes the sum over ranks. Blocks.
using AllReduceFn = std::function<absl::Status(float* data, int64_t count)>;

// Runs every size of `flags` through `all_reduce` and prints, on rank 0,
// `header` then one `RESULT size_bytes iters median_s min_s` line per size.
// `exchange` (float32 exact: the barrier that gathers each iteration's
// times) may be `all_reduce` itself.
absl::Status RunSizes(const BenchFlags& flags, const std::string& header,
                      const AllReduceFn& all_reduce,
                      const AllReduceFn& exchange);

// A rank's main(): parses the common flags plus `system_flags` (usage and
// exit 2 on a bad one), arms the --deadline-s watchdog (exit 3), calls
// `run`, and on an error prints it naming the rank and exits 1 without
// static destructors (transport threads may still run).
int BenchMain(int argc, char** argv, const char* name, const char* usage,
              const std::set<std::string>& system_flags,
              const std::function<absl::Status(const BenchFlags&)>& run);

}  // namespace lockstep

#endif  // LOCKSTEP_BENCHMARKS_ALLREDUCE_HARNESS_H_
