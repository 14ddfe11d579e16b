// Whether the parts a failed generation's survivors kept in memory make the
// whole training state of a job with sharded optimizer state and copies
// (cluster.copies): rank k's part is kept by rank k and by rank k+1, so
// it survives unless both are lost. Which survivor sends which part.
#ifndef LOCKSTEP_COORDINATOR_KEPT_PARTS_H_
#define LOCKSTEP_COORDINATOR_KEPT_PARTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace lockstep {

// What one worker of the next generation (its rank there) kept: the parts
// of ranks held_rank and held_rank - 1 of a world of held_world, of
// held_step.
struct HeldParts {
  int rank = 0;
  int64_t step = 0;
  int held_rank = 0;
  int held_world = 0;
};

struct KeptPartsPlan {
  int64_t step = 0;
  // donors[k]: the rank of the next generation that sends old rank k's
  // part (its owner when it survived, else the next rank).
  std::vector<int> donors;
};

// The plan, or FailedPrecondition saying why the parts do not make the
// whole state: none kept, worlds that differ, steps that differ (the
// failure broke a step after some ranks made its update: "ranks 0 and 2
// kept step 41, rank 1 step 40"), or a part lost with both its holders
// ("the part of rank 2 was lost with ranks 2 and 3").
absl::StatusOr<KeptPartsPlan> PlanKeptParts(const std::vector<HeldParts>& held);

}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_KEPT_PARTS_H_
